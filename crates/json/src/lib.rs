//! JSON with comments: a lossless parser that keeps key order and a source span for every node.
