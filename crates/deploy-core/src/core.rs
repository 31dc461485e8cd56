//! The state machine: events in, effects out. Generic over what a call is (`C`), what it answers (`A`) and what
//! an error is (`E`), so it can be tested with plain numbers and strings.

use std::collections::VecDeque;

use thiserror::Error;

use crate::plan::{NodeKind, Plan};

/// What evaluating a node's body came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Evaluation<C, E> {
    /// Its condition is false: skip it (its dependents still run).
    Skip,
    /// Perform this call.
    Perform(C),
    /// The body could not be evaluated (or the call could not be prepared): the node fails before any call.
    Fail(E),
    /// The driver withdrew the node before its call because the run is being stopped (it was still waiting for
    /// its turn behind other calls): it never starts, and the run ends canceled.
    Withdrawn,
}

/// Why a performed call did not succeed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure<E> {
    Failed(E),
    /// A nested deployment was canceled: the deployment is canceled too, without a failure of its own.
    Canceled,
}

/// What the driver tells the core.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<C, A, E> {
    /// A node asked for with [`Effect::Admit`] holds a parallelism slot.
    Admitted(usize),
    /// A node asked for with [`Effect::Admit`] will not get a slot (the run is being canceled).
    NotAdmitted(usize),
    Evaluated(usize, Evaluation<C, E>),
    Performed(usize, Result<A, Failure<E>>),
    /// The user canceled the deployment: start nothing more, let the calls in flight finish.
    Cancel,
}

/// Why a node was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Its condition was known false before evaluation.
    Condition,
    /// Its evaluation found the condition false.
    Evaluated,
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<C, A, E> {
    /// Wait for a slot of the tree's parallelism, then send [`Event::Admitted`] (or [`Event::NotAdmitted`]).
    Admit(usize),
    /// Evaluate the node's body and prepare its call, then send [`Event::Evaluated`].
    Evaluate(usize),
    /// Journal the node's operation as running; comes right before its [`Effect::Perform`].
    Started(usize),
    /// Make the call, then send [`Event::Performed`].
    Perform(usize, C),
    /// Journal the success and record what was deployed.
    Succeeded(usize, A),
    /// Journal the failure.
    Failed(usize, E),
    /// Journal that the node's call ended canceled (a nested deployment whose child was canceled).
    Canceled(usize),
    /// Report the skip.
    Skipped(usize, SkipReason),
    /// The node was admitted after the run began to stop: release its slot; it never starts.
    NotStarted(usize),
    /// The run is over; nothing is in flight. Always the last effect.
    Finish(Verdict<E>),
}

/// How the run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict<E> {
    pub status: Status<E>,
    /// The nodes that succeeded, in the plan's order.
    pub succeeded: Vec<usize>,
    /// [`Core::interrupted`] nodes this run stopped before performing again: their journal still says running
    /// from the run that died, so the driver must end it.
    pub left_interrupted: Vec<usize>,
}

/// The terminal status of a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Status<E> {
    /// Every node succeeded or was skipped: evaluate the outputs.
    Succeeded,
    /// Every failure, in the order they happened.
    Failed(Vec<E>),
    /// Canceled without any failure.
    Canceled,
}

/// What a crashed run's journal says of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    Started,
    Succeeded,
    Failed,
}

/// An event the core did not expect: a driver bug, reported instead of corrupting the run.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CoreError {
    #[error("node {0} is not in the plan")]
    UnknownNode(usize),
    #[error("event {event} for node {node}, which is {state}")]
    UnexpectedEvent {
        node: usize,
        event: &'static str,
        state: &'static str,
    },
    #[error("the run is already finished")]
    Finished,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Admitting,
    Evaluating,
    Performing,
    Succeeded,
    Skipped,
    Failed,
    Canceled,
    NotStarted,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Waiting => "waiting",
            State::Admitting => "waiting for a slot",
            State::Evaluating => "being evaluated",
            State::Performing => "being performed",
            State::Succeeded => "succeeded",
            State::Skipped => "skipped",
            State::Failed => "failed",
            State::Canceled => "canceled",
            State::NotStarted => "not started",
        }
    }
}

/// One deployment's run.
#[derive(Debug)]
pub struct Core<E> {
    plan: Plan,
    states: Vec<State>,
    /// Dependencies not yet satisfied, per node.
    waiting: Vec<usize>,
    ready: VecDeque<usize>,
    in_flight: usize,
    failures: Vec<E>,
    canceled: bool,
    finished: bool,
    interrupted: Vec<usize>,
}

impl<E: Clone> Core<E> {
    pub fn new(plan: Plan) -> Self {
        let waiting: Vec<usize> = plan.nodes.iter().map(|n| n.depends_on.len()).collect();
        let ready = plan
            .order
            .iter()
            .copied()
            .filter(|&i| waiting[i] == 0)
            .collect();
        Self {
            states: vec![State::Waiting; plan.len()],
            plan,
            waiting,
            ready,
            in_flight: 0,
            failures: Vec::new(),
            canceled: false,
            finished: false,
            interrupted: Vec::new(),
        }
    }

    /// A run resumed after a crash, from what its journal recorded (oldest first). Every node is performed again;
    /// the nodes started but not finished when the process died are [`Core::interrupted`].
    pub fn resume(
        plan: Plan,
        history: impl IntoIterator<Item = (usize, Recorded)>,
    ) -> Result<Self, CoreError> {
        let mut last: Vec<Option<Recorded>> = vec![None; plan.len()];
        for (node, recorded) in history {
            *last.get_mut(node).ok_or(CoreError::UnknownNode(node))? = Some(recorded);
        }
        let mut core = Self::new(plan);
        core.interrupted = core
            .plan
            .order
            .iter()
            .copied()
            .filter(|&i| last[i] == Some(Recorded::Started))
            .collect();
        Ok(core)
    }

    /// Nodes whose call was in flight when the run this one resumes died, in the plan's order.
    pub fn interrupted(&self) -> &[usize] {
        &self.interrupted
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether a failure or a cancel stopped new starts.
    pub fn is_stopping(&self) -> bool {
        self.canceled || !self.failures.is_empty()
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Nodes admitted, being evaluated or performed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The first effects: the nodes with no dependencies (or the verdict of an empty plan).
    pub fn start<C, A>(&mut self) -> Vec<Effect<C, A, E>> {
        let mut effects = Vec::new();
        self.dispatch(&mut effects);
        effects
    }

    /// Takes one event and returns what to do next.
    pub fn step<C, A>(&mut self, event: Event<C, A, E>) -> Result<Vec<Effect<C, A, E>>, CoreError> {
        if self.finished {
            return Err(CoreError::Finished);
        }
        let mut effects = Vec::new();
        match event {
            Event::Cancel => self.canceled = true,
            Event::Admitted(node) => {
                self.expect(node, State::Admitting, "Admitted")?;
                if self.is_stopping() {
                    self.settle(node, State::NotStarted);
                    effects.push(Effect::NotStarted(node));
                } else {
                    self.states[node] = State::Evaluating;
                    effects.push(Effect::Evaluate(node));
                }
            }
            Event::NotAdmitted(node) => {
                self.expect(node, State::Admitting, "NotAdmitted")?;
                self.settle(node, State::NotStarted);
            }
            Event::Evaluated(node, evaluation) => {
                self.expect(node, State::Evaluating, "Evaluated")?;
                match evaluation {
                    Evaluation::Skip => {
                        self.settle(node, State::Skipped);
                        self.release(node);
                        effects.push(Effect::Skipped(node, SkipReason::Evaluated));
                    }
                    Evaluation::Perform(call) => {
                        self.states[node] = State::Performing;
                        effects.push(Effect::Started(node));
                        effects.push(Effect::Perform(node, call));
                    }
                    Evaluation::Fail(error) => self.fail(node, error, &mut effects),
                    Evaluation::Withdrawn => {
                        // Only a stop withdraws a node, whichever of its event and this one came first.
                        self.canceled = true;
                        self.settle(node, State::NotStarted);
                        effects.push(Effect::NotStarted(node));
                    }
                }
            }
            Event::Performed(node, result) => {
                self.expect(node, State::Performing, "Performed")?;
                match result {
                    Ok(answer) => {
                        self.settle(node, State::Succeeded);
                        self.release(node);
                        effects.push(Effect::Succeeded(node, answer));
                    }
                    Err(Failure::Failed(error)) => self.fail(node, error, &mut effects),
                    Err(Failure::Canceled) => {
                        self.settle(node, State::Canceled);
                        self.canceled = true;
                        effects.push(Effect::Canceled(node));
                    }
                }
            }
        }
        self.dispatch(&mut effects);
        Ok(effects)
    }

    fn expect(&self, node: usize, state: State, event: &'static str) -> Result<(), CoreError> {
        let actual = *self.states.get(node).ok_or(CoreError::UnknownNode(node))?;
        if actual == state {
            Ok(())
        } else {
            Err(CoreError::UnexpectedEvent {
                node,
                event,
                state: actual.name(),
            })
        }
    }

    /// A node in flight reached a final state.
    fn settle(&mut self, node: usize, state: State) {
        self.states[node] = state;
        self.in_flight -= 1;
    }

    fn fail<C, A>(&mut self, node: usize, error: E, effects: &mut Vec<Effect<C, A, E>>) {
        self.settle(node, State::Failed);
        self.failures.push(error.clone());
        effects.push(Effect::Failed(node, error));
    }

    /// A node succeeded or was skipped: its dependents wait for one thing less.
    fn release(&mut self, node: usize) {
        for &d in &self.plan.dependents[node] {
            self.waiting[d] -= 1;
            if self.waiting[d] == 0 {
                self.ready.push_back(d);
            }
        }
    }

    /// Starts what is ready (unless stopping) and finishes when nothing is left in flight.
    fn dispatch<C, A>(&mut self, effects: &mut Vec<Effect<C, A, E>>) {
        while !self.is_stopping() {
            let Some(node) = self.ready.pop_front() else {
                break;
            };
            let spec = &self.plan.nodes[node];
            if spec.condition == Some(false) {
                self.states[node] = State::Skipped;
                self.release(node);
                effects.push(Effect::Skipped(node, SkipReason::Condition));
                continue;
            }
            self.in_flight += 1;
            match spec.kind {
                NodeKind::Leaf => {
                    self.states[node] = State::Admitting;
                    effects.push(Effect::Admit(node));
                }
                NodeKind::Nested => {
                    self.states[node] = State::Evaluating;
                    effects.push(Effect::Evaluate(node));
                }
            }
        }
        if self.in_flight == 0 && !self.finished {
            self.finished = true;
            effects.push(Effect::Finish(self.verdict()));
        }
    }

    fn verdict(&self) -> Verdict<E> {
        let status = if !self.failures.is_empty() {
            Status::Failed(self.failures.clone())
        } else if self.canceled {
            Status::Canceled
        } else {
            Status::Succeeded
        };
        let succeeded = self
            .plan
            .order
            .iter()
            .copied()
            .filter(|&i| self.states[i] == State::Succeeded)
            .collect();
        let left_interrupted = self
            .interrupted
            .iter()
            .copied()
            .filter(|&i| {
                !matches!(
                    self.states[i],
                    State::Succeeded | State::Failed | State::Canceled | State::Performing
                )
            })
            .collect();
        Verdict {
            status,
            succeeded,
            left_interrupted,
        }
    }
}
