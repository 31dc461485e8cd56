//! Bicep extension contract models (v2.0.0 and the REST draft), reference IDs and the transport interface.
