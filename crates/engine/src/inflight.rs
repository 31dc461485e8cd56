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

    #[tokio::test]
    async fn results_arrive_in_completion_order() {
        // Completion is driven by channels, not timers, so the order cannot depend on how loaded the machine is.
        let mut set = InFlight::new();
        let mut senders = Vec::new();
        for n in [1, 2, 3] {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            senders.push(Some(tx));
            set.push(Box::pin(async move {
                rx.await.ok();
                n
            }));
        }
        let mut got = Vec::new();
        for n in [2, 3, 1] {
            senders[n - 1].take().unwrap().send(()).unwrap();
            got.push(set.next().await.unwrap());
        }
        assert_eq!(got, vec![2, 3, 1]);
        assert!(set.is_empty());
        assert!(set.next().await.is_none());
    }
}
