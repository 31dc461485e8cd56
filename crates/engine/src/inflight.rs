//! A set of local (non-`Send`) futures polled together, returning results as they finish: the scheduler's
//! in-flight resource operations, which borrow the deployment's `Expansion` and so cannot be spawned.

use std::future::Future;
use std::pin::Pin;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

/// A boxed local future.
pub(crate) type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Futures in flight. A wake polls only the futures that were woken: a deployment schedules every ready resource
/// at once (hundreds waiting for a parallelism permit), and polling all of them on each completion made every
/// call's turnaround grow with the deployment's size.
pub(crate) struct InFlight<'a, T> {
    futures: FuturesUnordered<LocalFuture<'a, T>>,
}

impl<'a, T> InFlight<'a, T> {
    pub(crate) fn new() -> Self {
        InFlight {
            futures: FuturesUnordered::new(),
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
        self.futures.next().await
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

    /// A completion costs polls of the futures that were woken, not of everything in flight (a deployment keeps
    /// every ready resource in flight, most of them waiting for a parallelism permit).
    #[tokio::test]
    async fn a_completion_polls_only_the_woken_futures() {
        let polls = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let mut set = InFlight::new();
        let mut senders = Vec::new();
        for n in 0..500 {
            let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
            senders.push(Some(tx));
            let polls = polls.clone();
            set.push(Box::pin(std::future::poll_fn(move |cx| {
                polls.set(polls.get() + 1);
                std::pin::Pin::new(&mut rx).poll(cx).map(|_| n)
            })));
        }
        // Waiting for the last one pushed polls each future once, to start it.
        senders[499].take().unwrap().send(()).unwrap();
        assert_eq!(set.next().await, Some(499));
        let started = polls.get();
        assert_eq!(started, 500);
        for n in [42, 7, 0] {
            senders[n].take().unwrap().send(()).unwrap();
            assert_eq!(set.next().await, Some(n));
        }
        assert!(
            polls.get() - started <= 6,
            "3 completions polled {} futures",
            polls.get() - started
        );
    }
}
