//! A set of local (non-`Send`) futures polled together, returning results as they finish: the scheduler's
//! in-flight resource operations, which borrow the deployment's `Expansion` and so cannot be spawned.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

/// A boxed local future.
pub(crate) type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Futures in flight. Every wake polls all of them; the set is bounded by what a deployment schedules at once.
pub(crate) struct InFlight<'a, T> {
    futures: Vec<LocalFuture<'a, T>>,
}

impl<'a, T> InFlight<'a, T> {
    pub(crate) fn new() -> Self {
        InFlight {
            futures: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, future: LocalFuture<'a, T>) {
        self.futures.push(future);
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.futures.is_empty()
    }

    /// The next result; `None` when nothing is in flight.
    pub(crate) async fn next(&mut self) -> Option<T> {
        if self.futures.is_empty() {
            return None;
        }
        poll_fn(|cx| {
            for index in 0..self.futures.len() {
                if let Poll::Ready(value) = self.futures[index].as_mut().poll(cx) {
                    drop(self.futures.swap_remove(index));
                    return Poll::Ready(Some(value));
                }
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn results_arrive_in_completion_order() {
        let mut set = InFlight::new();
        for (n, ms) in [(1, 30u64), (2, 10), (3, 20)] {
            set.push(Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                n
            }));
        }
        let mut got = Vec::new();
        while let Some(n) = set.next().await {
            got.push(n);
        }
        assert_eq!(got, vec![2, 3, 1]);
        assert!(set.is_empty());
    }
}
