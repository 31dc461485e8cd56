//! Evaluation of ARM template expressions: the value type, the evaluator and the built-in function library.
