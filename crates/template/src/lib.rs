//! ARM templates and parameter files: model, validation and expansion into a deployment plan.
