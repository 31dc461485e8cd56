//! Property tests: any plan, any behaviour of its nodes, any completion order, any cancel point → the run
//! terminates with one verdict, every node starts at most once and only after its dependencies, and the verdict
//! agrees with what happened.

mod sim;

use cairn_deploy_core::{Node, NodeKind, Plan, Status};
use proptest::prelude::*;
use sim::{Behaviour, Sim, Trace};

#[derive(Clone, Debug)]
struct Case {
    nodes: Vec<Node>,
    order: Vec<usize>,
    behaviours: Vec<Behaviour>,
    capacity: usize,
    picks: Vec<usize>,
    cancel_after: Option<usize>,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        12 => Just(Behaviour::Succeed),
        1 => Just(Behaviour::Fail),
        1 => Just(Behaviour::FailEvaluation),
        1 => Just(Behaviour::Skip),
        1 => Just(Behaviour::Cancel),
        1 => Just(Behaviour::Withdraw),
    ]
}

/// A random DAG: each node depends on a random subset of the nodes before it (so no cycle), listed in a random
/// template order.
fn case(allow_faults: bool) -> impl Strategy<Value = Case> {
    (1usize..40).prop_flat_map(move |n| {
        let deps = proptest::collection::vec(
            proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
            n,
        );
        let kinds = proptest::collection::vec(
            prop_oneof![6 => Just(NodeKind::Leaf), 1 => Just(NodeKind::Nested)],
            n,
        );
        let conditions =
            proptest::collection::vec(prop_oneof![8 => Just(None), 1 => Just(Some(false))], n);
        let behaviours = if allow_faults {
            proptest::collection::vec(behaviour(), n).boxed()
        } else {
            proptest::collection::vec(Just(Behaviour::Succeed), n).boxed()
        };
        let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
        let cancel = if allow_faults {
            proptest::option::of(0usize..200).boxed()
        } else {
            Just(None).boxed()
        };
        (
            deps,
            kinds,
            conditions,
            behaviours,
            order,
            1usize..6,
            proptest::collection::vec(any::<usize>(), 400),
            cancel,
        )
            .prop_map(
                move |(
                    deps,
                    kinds,
                    conditions,
                    behaviours,
                    order,
                    capacity,
                    picks,
                    cancel_after,
                )| {
                    let nodes = (0..n)
                        .map(|i| {
                            let mut depends_on: Vec<usize> = if i == 0 {
                                vec![]
                            } else {
                                deps[i].iter().map(|ix| ix.index(i)).collect()
                            };
                            depends_on.sort_unstable();
                            depends_on.dedup();
                            Node {
                                depends_on,
                                condition: conditions[i],
                                kind: kinds[i],
                            }
                        })
                        .collect();
                    Case {
                        nodes,
                        order,
                        behaviours,
                        capacity,
                        picks,
                        cancel_after,
                    }
                },
            )
    })
}

fn run(case: &Case) -> Sim {
    let plan = Plan::with_order(case.nodes.clone(), case.order.clone()).unwrap();
    let mut sim = Sim::new(plan, case.behaviours.clone(), case.capacity);
    sim.start();
    let mut step = 0;
    while sim.has_pending() {
        if case.cancel_after == Some(step) {
            sim.cancel();
        }
        let pick = case.picks[step % case.picks.len()];
        sim.deliver(pick);
        step += 1;
        assert!(step < 10_000, "the run does not end");
    }
    sim
}

fn first(sim: &Sim, entry: Trace) -> Option<usize> {
    sim.position(|t| *t == entry)
}

fn check_common(case: &Case, sim: &Sim) -> Result<(), TestCaseError> {
    prop_assert!(sim.verdict.is_some(), "a verdict");
    prop_assert!(sim.core.is_finished());
    prop_assert_eq!(sim.core.in_flight(), 0);
    prop_assert!(sim.max_held <= case.capacity);
    for (n, node) in case.nodes.iter().enumerate() {
        let count = |entry: Trace| sim.trace.iter().filter(|t| **t == entry).count();
        prop_assert!(count(Trace::Evaluated(n)) <= 1, "{} evaluated once", n);
        prop_assert!(count(Trace::Started(n)) <= 1, "{} started once", n);
        let finished = count(Trace::Succeeded(n))
            + count(Trace::Failed(n))
            + count(Trace::Canceled(n))
            + count(Trace::Skipped(n));
        prop_assert!(finished <= 1, "{} ends once", n);
        if let Some(evaluated) = first(sim, Trace::Evaluated(n)) {
            for &d in &node.depends_on {
                let done =
                    first(sim, Trace::Succeeded(d)).or_else(|| first(sim, Trace::Skipped(d)));
                prop_assert!(
                    done.is_some_and(|p| p < evaluated),
                    "{} ran before its dependency {} was done",
                    n,
                    d
                );
            }
        }
        // No operation is left running: every started call ends in the journal.
        if count(Trace::Started(n)) == 1 {
            let ended =
                count(Trace::Succeeded(n)) + count(Trace::Failed(n)) + count(Trace::Canceled(n));
            prop_assert_eq!(ended, 1, "{} started and never ended", n);
        }
        if node.condition == Some(false) {
            prop_assert!(first(sim, Trace::Evaluated(n)).is_none());
        }
    }
    // Nothing starts evaluating after the first failure.
    if let Some(failed) = sim.position(|t| matches!(t, Trace::Failed(_))) {
        prop_assert!(
            !sim.trace[failed..]
                .iter()
                .any(|t| matches!(t, Trace::Evaluated(_)))
        );
    }
    let succeeded: Vec<usize> = case
        .order
        .iter()
        .copied()
        .filter(|&n| first(sim, Trace::Succeeded(n)).is_some())
        .collect();
    prop_assert_eq!(&sim.verdict.as_ref().unwrap().succeeded, &succeeded);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn without_faults_every_node_runs_once_and_the_run_succeeds(case in case(false)) {
        let sim = run(&case);
        check_common(&case, &sim)?;
        prop_assert_eq!(sim.status(), &Status::Succeeded);
        for (n, node) in case.nodes.iter().enumerate() {
            let ended = first(&sim, Trace::Succeeded(n)).or_else(|| first(&sim, Trace::Skipped(n)));
            prop_assert!(ended.is_some(), "{} ran", n);
            if node.condition != Some(false) {
                prop_assert!(first(&sim, Trace::Started(n)).is_some(), "{} started", n);
            }
        }
    }

    #[test]
    fn with_faults_and_cancels_the_verdict_matches_what_happened(case in case(true)) {
        let sim = run(&case);
        check_common(&case, &sim)?;
        let failed: Vec<String> = sim.trace.iter().filter_map(|t| match t {
            Trace::Failed(n) => Some(if case.behaviours[*n] == Behaviour::FailEvaluation {
                format!("evaluation of {n}")
            } else {
                format!("call of {n}")
            }),
            _ => None,
        }).collect();
        match sim.status() {
            Status::Failed(errors) => prop_assert_eq!(errors, &failed),
            Status::Canceled => prop_assert!(failed.is_empty()),
            Status::Succeeded => {
                prop_assert!(failed.is_empty());
                for n in 0..case.nodes.len() {
                    let ended = first(&sim, Trace::Succeeded(n)).or_else(|| first(&sim, Trace::Skipped(n)));
                    prop_assert!(ended.is_some(), "{} ran", n);
                }
            }
        }
    }
}
