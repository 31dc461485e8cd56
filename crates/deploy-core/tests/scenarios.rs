//! Table-driven scenarios for the deployment core, run by a simulated driver: no runtime, no I/O.

mod sim;

use cairn_deploy_core::{Core, Node, Plan, Recorded, Status};
use sim::{Behaviour, Sim, Trace};

use Behaviour::*;

/// Delivers pending events first-in, first-out.
fn fifo(_: usize) -> usize {
    0
}

/// Delivers the newest pending event first.
fn lifo(n: usize) -> usize {
    n - 1
}

fn succeeded(sim: &Sim) -> Vec<usize> {
    sim.verdict.as_ref().unwrap().succeeded.clone()
}

fn all(behaviour: Behaviour, n: usize) -> Vec<Behaviour> {
    vec![behaviour; n]
}

#[test]
fn a_chain_runs_one_after_another() {
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([0]), Node::leaf([1])]).unwrap();
    let mut sim = Sim::new(plan, all(Succeed, 3), 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Succeeded);
    assert_eq!(
        sim.journal(),
        vec![
            Trace::Started(0),
            Trace::Succeeded(0),
            Trace::Started(1),
            Trace::Succeeded(1),
            Trace::Started(2),
            Trace::Succeeded(2)
        ]
    );
    assert_eq!(sim.max_held, 1);
}

#[test]
fn a_diamond_joins_after_both_branches() {
    // 0 → {1, 2} → 3
    let plan = Plan::new(vec![
        Node::leaf([]),
        Node::leaf([0]),
        Node::leaf([0]),
        Node::leaf([1, 2]),
    ])
    .unwrap();
    for order in [fifo as fn(usize) -> usize, lifo] {
        let mut sim = Sim::new(plan.clone(), all(Succeed, 4), 16);
        sim.start();
        sim.run(order);
        assert_eq!(sim.status(), &Status::Succeeded);
        let join = sim.position(|t| *t == Trace::Started(3)).unwrap();
        for branch in [1, 2] {
            assert!(sim.position(|t| *t == Trace::Succeeded(branch)).unwrap() < join);
        }
        assert_eq!(sim.max_held, 2, "the branches run side by side");
        assert_eq!(succeeded(&sim), vec![0, 1, 2, 3]);
    }
}

#[test]
fn a_serial_copy_with_batch_size_three_runs_three_at_a_time() {
    // Nine instances; each batch waits for the whole previous one (how expansion writes `batchSize: 3`).
    let nodes = (0..9)
        .map(|i| {
            let batch = i / 3;
            Node::leaf(if batch == 0 {
                vec![]
            } else {
                ((batch - 1) * 3..batch * 3).collect()
            })
        })
        .collect();
    let plan = Plan::new(nodes).unwrap();
    let mut sim = Sim::new(plan, all(Succeed, 9), 16);
    sim.start();
    sim.run(lifo);
    assert_eq!(sim.status(), &Status::Succeeded);
    assert_eq!(sim.max_held, 3);
    for batch in 1..3 {
        let first_start = (batch * 3..batch * 3 + 3)
            .map(|n| sim.position(|t| *t == Trace::Started(n)).unwrap())
            .min()
            .unwrap();
        for previous in (batch - 1) * 3..batch * 3 {
            assert!(sim.position(|t| *t == Trace::Succeeded(previous)).unwrap() < first_start);
        }
    }
}

#[test]
fn parallelism_is_bounded_by_the_slots() {
    let plan = Plan::new((0..40).map(|_| Node::leaf([])).collect()).unwrap();
    let mut sim = Sim::new(plan, all(Succeed, 40), 16);
    sim.start();
    sim.run(lifo);
    assert_eq!(sim.status(), &Status::Succeeded);
    assert_eq!(sim.max_held, 16);
    assert_eq!(succeeded(&sim), (0..40).collect::<Vec<_>>());
}

#[test]
fn a_nested_module_failure_fails_the_deployment_and_stops_its_dependents() {
    // 0: a leaf; 1: a nested module that fails; 2: depends on the module; 3: independent, in flight alongside.
    let plan = Plan::new(vec![
        Node::leaf([]),
        Node::nested([0]),
        Node::leaf([1]),
        Node::leaf([0]),
    ])
    .unwrap();
    let mut sim = Sim::new(plan, vec![Succeed, Fail, Succeed, Succeed], 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Failed(vec!["call of 1".to_string()]));
    assert!(sim.position(|t| *t == Trace::Started(2)).is_none());
    // The sibling that was already running finished and was recorded.
    assert!(sim.position(|t| *t == Trace::Succeeded(3)).is_some());
    assert_eq!(succeeded(&sim), vec![0, 3]);
    // A nested module takes no parallelism slot of its own.
    assert_eq!(sim.max_held, 1);
}

#[test]
fn an_evaluation_failure_fails_without_a_call() {
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([0])]).unwrap();
    let mut sim = Sim::new(plan, vec![FailEvaluation, Succeed], 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(
        sim.status(),
        &Status::Failed(vec!["evaluation of 0".into()])
    );
    assert_eq!(sim.journal(), vec![Trace::Failed(0)]);
}

#[test]
fn skipped_nodes_release_their_dependents() {
    // 0 is known false before evaluation; 1 finds its condition false; 2 depends on both.
    let plan = Plan::new(vec![
        Node::leaf([]).with_condition(false),
        Node::leaf([]),
        Node::leaf([0, 1]),
    ])
    .unwrap();
    let mut sim = Sim::new(plan, vec![Succeed, Skip, Succeed], 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Succeeded);
    assert_eq!(sim.journal(), vec![Trace::Started(2), Trace::Succeeded(2)]);
    assert!(sim.position(|t| *t == Trace::Evaluated(0)).is_none());
    assert_eq!(succeeded(&sim), vec![2]);
}

#[test]
fn a_cancel_mid_run_lets_the_calls_in_flight_finish_and_starts_nothing_more() {
    // Twenty independent leaves with 4 slots: cancel after the first completion.
    let plan = Plan::new((0..20).map(|_| Node::leaf([])).collect()).unwrap();
    let mut sim = Sim::new(plan, all(Succeed, 20), 4);
    sim.start();
    while sim
        .journal()
        .iter()
        .all(|t| !matches!(t, Trace::Succeeded(_)))
    {
        sim.deliver(0);
    }
    let started_before = sim
        .journal()
        .iter()
        .filter(|t| matches!(t, Trace::Started(_)))
        .count();
    sim.cancel();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Canceled);
    let started: Vec<usize> = sim
        .journal()
        .iter()
        .filter_map(|t| match t {
            Trace::Started(n) => Some(*n),
            _ => None,
        })
        .collect();
    // Admitted-but-not-evaluated nodes may still have started their call; nothing queued for a slot did.
    assert!(started.len() <= started_before + 4, "{started:?}");
    for n in &started {
        assert!(
            sim.position(|t| *t == Trace::Succeeded(*n)).is_some(),
            "{n} finished"
        );
    }
    assert!(started.len() < 20);
}

#[test]
fn a_node_withdrawn_before_its_call_never_starts_and_the_run_ends_canceled() {
    // 0 and 1 side by side, 2 after 0: 1 is withdrawn (a stop came while it waited to call) after 0's call began.
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([]), Node::leaf([0])]).unwrap();
    let mut sim = Sim::new(plan.clone(), vec![Succeed, Withdraw, Succeed], 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Canceled);
    assert!(sim.position(|t| *t == Trace::NotStarted(1)).is_some());
    assert!(sim.position(|t| *t == Trace::Started(1)).is_none());
    assert!(
        sim.position(|t| *t == Trace::Admitted(2)).is_none(),
        "nothing starts after a withdrawal"
    );
    assert_eq!(succeeded(&sim), vec![0]);
    // Withdrawn first: a node admitted meanwhile never starts either.
    let mut sim = Sim::new(plan, vec![Succeed, Withdraw, Succeed], 16);
    sim.start();
    sim.run(lifo);
    assert_eq!(sim.status(), &Status::Canceled);
    assert!(sim.position(|t| matches!(t, Trace::Started(_))).is_none());
    assert!(succeeded(&sim).is_empty());
}

#[test]
fn a_canceled_nested_deployment_cancels_the_parent() {
    let plan = Plan::new(vec![Node::nested([]), Node::leaf([0])]).unwrap();
    let mut sim = Sim::new(plan, vec![Cancel, Succeed], 16);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Canceled);
    assert!(sim.position(|t| *t == Trace::Started(1)).is_none());
    // Its operation does not stay running.
    assert_eq!(sim.journal(), vec![Trace::Started(0), Trace::Canceled(0)]);
}

#[test]
fn a_failure_wins_over_a_cancel() {
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([])]).unwrap();
    let mut sim = Sim::new(plan, vec![Fail, Succeed], 16);
    sim.start();
    sim.deliver(0); // 0 admitted
    sim.cancel();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Failed(vec!["call of 0".into()]));
}

#[test]
fn an_empty_plan_finishes_at_once() {
    let mut sim = Sim::new(Plan::new(vec![]).unwrap(), vec![], 16);
    sim.start();
    assert_eq!(sim.status(), &Status::Succeeded);
}

#[test]
fn events_out_of_protocol_are_errors_not_panics() {
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([0])]).unwrap();
    let mut core: Core<String> = Core::new(plan);
    let _ = core.start::<(), ()>();
    assert!(
        core.step::<(), ()>(cairn_deploy_core::Event::Admitted(1))
            .is_err()
    );
    assert!(
        core.step::<(), ()>(cairn_deploy_core::Event::Admitted(7))
            .is_err()
    );
    assert!(
        core.step::<(), ()>(cairn_deploy_core::Event::Performed(0, Ok(())))
            .is_err()
    );
}

/// Crash after each journal step of a diamond with a failing-free run, resume from the journal so far, and
/// finish: the resumed run names the operations that were in flight and performs every node.
#[test]
fn a_run_resumed_after_a_crash_at_each_journal_step_finishes() {
    let plan = Plan::new(vec![
        Node::leaf([]),
        Node::leaf([0]),
        Node::nested([0]),
        Node::leaf([1, 2]),
        Node::leaf([]),
    ])
    .unwrap();
    let behaviours = all(Succeed, 5);
    let mut full = Sim::new(plan.clone(), behaviours.clone(), 2);
    full.start();
    full.run(lifo);
    let journal = full.journal();
    assert_eq!(journal.len(), 10);
    for crash_at in 0..=journal.len() {
        let history = journal[..crash_at].iter().map(|t| match t {
            Trace::Started(n) => (*n, Recorded::Started),
            Trace::Succeeded(n) => (*n, Recorded::Succeeded),
            Trace::Failed(n) | Trace::Canceled(n) => (*n, Recorded::Failed),
            other => unreachable!("{other:?} is not a journal step"),
        });
        let core = Core::resume(plan.clone(), history).unwrap();
        let mut expected_interrupted: Vec<usize> = (0..5)
            .filter(|n| {
                journal[..crash_at].contains(&Trace::Started(*n))
                    && !journal[..crash_at].contains(&Trace::Succeeded(*n))
            })
            .collect();
        expected_interrupted.sort();
        assert_eq!(
            core.interrupted(),
            expected_interrupted.as_slice(),
            "crash at {crash_at}"
        );
        let mut resumed = Sim::with_core(core, behaviours.clone(), 2);
        resumed.start();
        resumed.run(fifo);
        assert_eq!(resumed.status(), &Status::Succeeded, "crash at {crash_at}");
        assert_eq!(succeeded(&resumed), vec![0, 1, 2, 3, 4]);
    }
}

/// A resumed run that fails before it performs an interrupted node again names it, so its journal is ended.
#[test]
fn a_resumed_run_that_stops_early_names_the_interrupted_nodes_it_left() {
    // 0 fails at once; 1 (waiting on 0) and 2 were in flight when the previous run died; one slot, so 2 waits.
    let plan = Plan::new(vec![Node::leaf([]), Node::leaf([0]), Node::leaf([])]).unwrap();
    let core = Core::resume(plan, [(1, Recorded::Started), (2, Recorded::Started)]).unwrap();
    assert_eq!(core.interrupted(), &[1, 2]);
    let mut sim = Sim::with_core(core, vec![Fail, Succeed, Succeed], 1);
    sim.start();
    sim.run(fifo);
    assert_eq!(sim.status(), &Status::Failed(vec!["call of 0".into()]));
    assert_eq!(sim.verdict.as_ref().unwrap().left_interrupted, vec![1, 2]);
}

#[test]
fn a_journal_naming_an_unknown_node_is_refused() {
    let plan = Plan::new(vec![Node::leaf([])]).unwrap();
    assert!(Core::<String>::resume(plan, [(3, Recorded::Started)]).is_err());
}
