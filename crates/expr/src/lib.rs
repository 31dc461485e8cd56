//! The ARM template expression language: lexer, parser, AST with spans, and printer.
