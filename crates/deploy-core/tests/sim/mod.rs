//! A simulated driver for the core: performs effects instantly, delivers their events in an order the test
//! chooses, holds a fixed number of parallelism slots, and writes a trace (the "journal") to assert on.

#![allow(dead_code)]

use std::collections::VecDeque;

use cairn_deploy_core::{
    Core, Effect, Evaluation, Event, Failure, NodeKind, Plan, SkipReason, Status, Verdict,
};

/// What a node does when the simulated driver evaluates and performs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    Succeed,
    /// The call fails.
    Fail,
    /// The evaluation fails (no call).
    FailEvaluation,
    /// The evaluation finds the condition false.
    Skip,
    /// A nested deployment whose child was canceled.
    Cancel,
    /// The driver withdraws it after its evaluation: the run was stopped while it waited for its turn to call.
    Withdraw,
}

/// What happened, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trace {
    Admitted(usize),
    Evaluated(usize),
    Started(usize),
    Succeeded(usize),
    Failed(usize),
    Canceled(usize),
    Skipped(usize),
    NotStarted(usize),
}

/// An event waiting to be delivered.
#[derive(Clone, Debug)]
enum Pending {
    Admitted(usize),
    Evaluated(usize),
    Performed(usize),
}

pub struct Sim {
    pub core: Core<String>,
    behaviours: Vec<Behaviour>,
    kinds: Vec<NodeKind>,
    capacity: usize,
    held: usize,
    queued_for_slot: VecDeque<usize>,
    pending: Vec<Pending>,
    pub trace: Vec<Trace>,
    pub verdict: Option<Verdict<String>>,
    pub max_held: usize,
}

impl Sim {
    pub fn new(plan: Plan, behaviours: Vec<Behaviour>, capacity: usize) -> Self {
        Self::with_core(Core::new(plan), behaviours, capacity)
    }

    pub fn with_core(core: Core<String>, behaviours: Vec<Behaviour>, capacity: usize) -> Self {
        let kinds = (0..core.plan().len())
            .map(|i| {
                core.plan()
                    .node(i)
                    .map(|n| n.kind)
                    .unwrap_or(NodeKind::Leaf)
            })
            .collect();
        Self {
            core,
            behaviours,
            kinds,
            capacity: capacity.max(1),
            held: 0,
            queued_for_slot: VecDeque::new(),
            pending: Vec::new(),
            trace: Vec::new(),
            verdict: None,
            max_held: 0,
        }
    }

    pub fn start(&mut self) {
        let effects = self.core.start();
        self.apply(effects);
    }

    /// Whether an event is waiting to be delivered.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Delivers the `pick`-th pending event (modulo their number).
    pub fn deliver(&mut self, pick: usize) {
        let pending = self.pending.remove(pick % self.pending.len());
        let event = match pending {
            Pending::Admitted(n) => Event::Admitted(n),
            Pending::Evaluated(n) => Event::Evaluated(
                n,
                match self.behaviours[n] {
                    Behaviour::Skip => Evaluation::Skip,
                    Behaviour::FailEvaluation => Evaluation::Fail(format!("evaluation of {n}")),
                    Behaviour::Withdraw => Evaluation::Withdrawn,
                    _ => Evaluation::Perform(n),
                },
            ),
            Pending::Performed(n) => Event::Performed(
                n,
                match self.behaviours[n] {
                    Behaviour::Fail => Err(Failure::Failed(format!("call of {n}"))),
                    Behaviour::Cancel => Err(Failure::Canceled),
                    _ => Ok(n),
                },
            ),
        };
        if let Event::Performed(n, Err(Failure::Canceled)) = &event {
            self.release_slot(*n);
        }
        let effects = self
            .core
            .step(event)
            .expect("the simulated driver follows the protocol");
        self.apply(effects);
    }

    pub fn cancel(&mut self) {
        if self.core.is_finished() {
            return;
        }
        // A real driver stops waiting for slots on cancel.
        let queued: Vec<usize> = self.queued_for_slot.drain(..).collect();
        let mut effects = self
            .core
            .step(Event::<usize, usize, String>::Cancel)
            .unwrap();
        for n in queued {
            effects.extend(self.core.step(Event::NotAdmitted(n)).unwrap());
        }
        self.apply(effects);
    }

    /// Delivers events, choosing each with `pick`, until nothing is pending.
    pub fn run(&mut self, mut pick: impl FnMut(usize) -> usize) {
        while self.has_pending() {
            let n = self.pending.len();
            self.deliver(pick(n));
        }
    }

    fn release_slot(&mut self, node: usize) {
        if self.kinds[node] == NodeKind::Leaf {
            self.held -= 1;
            if let Some(next) = self.queued_for_slot.pop_front() {
                self.take_slot(next);
            }
        }
    }

    fn take_slot(&mut self, node: usize) {
        self.held += 1;
        self.max_held = self.max_held.max(self.held);
        self.pending.push(Pending::Admitted(node));
    }

    fn apply(&mut self, effects: Vec<Effect<usize, usize, String>>) {
        assert!(self.verdict.is_none(), "effects after the verdict");
        for effect in effects {
            assert!(self.verdict.is_none(), "an effect after Finish");
            match effect {
                Effect::Admit(n) => {
                    if self.held < self.capacity {
                        self.take_slot(n);
                    } else {
                        self.queued_for_slot.push_back(n);
                    }
                }
                Effect::Evaluate(n) => {
                    if self.kinds[n] == NodeKind::Leaf {
                        self.trace.push(Trace::Admitted(n));
                    }
                    self.trace.push(Trace::Evaluated(n));
                    self.pending.push(Pending::Evaluated(n));
                }
                Effect::Started(n) => self.trace.push(Trace::Started(n)),
                Effect::Perform(n, call) => {
                    assert_eq!(n, call);
                    self.pending.push(Pending::Performed(n));
                }
                Effect::Succeeded(n, answer) => {
                    assert_eq!(n, answer);
                    self.trace.push(Trace::Succeeded(n));
                    self.release_slot(n);
                }
                Effect::Failed(n, _) => {
                    self.trace.push(Trace::Failed(n));
                    self.release_slot(n);
                }
                Effect::Skipped(n, reason) => {
                    self.trace.push(Trace::Skipped(n));
                    if reason == SkipReason::Evaluated {
                        self.release_slot(n);
                    }
                }
                Effect::Canceled(n) => self.trace.push(Trace::Canceled(n)),
                Effect::NotStarted(n) => {
                    self.trace.push(Trace::NotStarted(n));
                    self.release_slot(n);
                }
                Effect::Finish(verdict) => self.verdict = Some(verdict),
            }
        }
    }

    /// The position of the first trace entry matching `f`.
    pub fn position(&self, f: impl Fn(&Trace) -> bool) -> Option<usize> {
        self.trace.iter().position(f)
    }

    pub fn status(&self) -> &Status<String> {
        &self.verdict.as_ref().expect("a verdict").status
    }

    /// The trace's journal entries (what a store would hold): started, succeeded and failed operations.
    pub fn journal(&self) -> Vec<Trace> {
        self.trace
            .iter()
            .filter(|t| {
                matches!(
                    t,
                    Trace::Started(_) | Trace::Succeeded(_) | Trace::Failed(_) | Trace::Canceled(_)
                )
            })
            .cloned()
            .collect()
    }
}
