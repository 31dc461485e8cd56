//! The graph the core schedules: one node per resource instance of a deployment, with its dependencies, its
//! condition as far as it is known before evaluation, and whether it is a leaf or a nested deployment.

use thiserror::Error;

/// What kind of work a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A resource sent to a provider or an extension: it takes one slot of the deployment tree's parallelism
    /// while it is evaluated and called.
    Leaf,
    /// A nested deployment: it runs a child deployment (whose leaves take the slots), so it takes none itself.
    Nested,
}

/// One resource instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The nodes this one waits for (indexes into the plan). Serial copy loops arrive here as dependencies of
    /// each batch on the previous one.
    pub depends_on: Vec<usize>,
    /// `Some(false)`: the condition is known false before evaluation, so the node is skipped without a call.
    /// `None`/`Some(true)`: decided (again) when the node is evaluated.
    pub condition: Option<bool>,
    pub kind: NodeKind,
}

impl Node {
    /// A leaf with these dependencies and no known condition.
    pub fn leaf(depends_on: impl Into<Vec<usize>>) -> Self {
        Self {
            depends_on: depends_on.into(),
            condition: None,
            kind: NodeKind::Leaf,
        }
    }

    /// A nested deployment with these dependencies and no known condition.
    pub fn nested(depends_on: impl Into<Vec<usize>>) -> Self {
        Self {
            kind: NodeKind::Nested,
            ..Self::leaf(depends_on)
        }
    }

    /// The same node with a condition known before evaluation.
    pub fn with_condition(mut self, condition: bool) -> Self {
        self.condition = Some(condition);
        self
    }
}

/// Why a plan cannot be scheduled. The template layer rejects these before a plan reaches the core; the core
/// checks again so that no input can make it wait forever or index out of bounds.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("node {node} depends on node {dependency}, which is not in the plan")]
    UnknownDependency { node: usize, dependency: usize },
    #[error("node {0} depends on itself")]
    SelfDependency(usize),
    #[error("the dependencies form a cycle through node {0}")]
    Cycle(usize),
    #[error("the order must list every node exactly once")]
    BadOrder,
}

/// A checked graph: every dependency in range, no cycle, and a template order over all nodes.
#[derive(Clone, Debug)]
pub struct Plan {
    pub(crate) nodes: Vec<Node>,
    /// The template's order: ready nodes start in it, and results are listed in it.
    pub(crate) order: Vec<usize>,
    pub(crate) dependents: Vec<Vec<usize>>,
}

impl Plan {
    /// A plan whose order is the nodes' own order.
    pub fn new(nodes: Vec<Node>) -> Result<Self, PlanError> {
        let order = (0..nodes.len()).collect();
        Self::with_order(nodes, order)
    }

    /// A plan listing (and starting) nodes in `order`, a permutation of the node indexes.
    pub fn with_order(nodes: Vec<Node>, order: Vec<usize>) -> Result<Self, PlanError> {
        let count = nodes.len();
        let mut seen = vec![false; count];
        if order.len() != count {
            return Err(PlanError::BadOrder);
        }
        for &i in &order {
            if i >= count || std::mem::replace(&mut seen[i], true) {
                return Err(PlanError::BadOrder);
            }
        }
        let mut dependents = vec![Vec::new(); count];
        for (index, node) in nodes.iter().enumerate() {
            for &dependency in &node.depends_on {
                if dependency >= count {
                    return Err(PlanError::UnknownDependency {
                        node: index,
                        dependency,
                    });
                }
                if dependency == index {
                    return Err(PlanError::SelfDependency(index));
                }
                dependents[dependency].push(index);
            }
        }
        let plan = Self {
            nodes,
            order,
            dependents,
        };
        plan.check_acyclic()?;
        Ok(plan)
    }

    /// Kahn's algorithm: a node never reached has a cycle upstream.
    fn check_acyclic(&self) -> Result<(), PlanError> {
        let mut waiting: Vec<usize> = self.nodes.iter().map(|n| n.depends_on.len()).collect();
        let mut ready: Vec<usize> = (0..self.nodes.len()).filter(|&i| waiting[i] == 0).collect();
        let mut reached = 0;
        while let Some(i) = ready.pop() {
            reached += 1;
            for &d in &self.dependents[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    ready.push(d);
                }
            }
        }
        if reached == self.nodes.len() {
            return Ok(());
        }
        let stuck = waiting.iter().position(|&w| w > 0).unwrap_or_default();
        Err(PlanError::Cycle(stuck))
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn node(&self, index: usize) -> Option<&Node> {
        self.nodes.get(index)
    }

    /// The template order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The nodes that depend on `index`.
    pub fn dependents(&self, index: usize) -> &[usize] {
        self.dependents
            .get(index)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_a_plan() {
        let plan = Plan::new(vec![Node::leaf([]), Node::leaf([0]), Node::leaf([1])]).unwrap();
        assert_eq!(plan.dependents(0), &[1]);
        assert_eq!(plan.order(), &[0, 1, 2]);
    }

    #[test]
    fn bad_plans_are_refused() {
        assert_eq!(
            Plan::new(vec![Node::leaf([3])]).unwrap_err(),
            PlanError::UnknownDependency {
                node: 0,
                dependency: 3
            }
        );
        assert_eq!(
            Plan::new(vec![Node::leaf([0])]).unwrap_err(),
            PlanError::SelfDependency(0)
        );
        assert!(matches!(
            Plan::new(vec![Node::leaf([]), Node::leaf([2]), Node::leaf([1])]).unwrap_err(),
            PlanError::Cycle(1 | 2)
        ));
        assert_eq!(
            Plan::with_order(vec![Node::leaf([]), Node::leaf([])], vec![0, 0]).unwrap_err(),
            PlanError::BadOrder
        );
        assert_eq!(
            Plan::with_order(vec![Node::leaf([])], vec![]).unwrap_err(),
            PlanError::BadOrder
        );
    }
}
