//! Conformance kit that checks any extension against the Bicep extension contract.
