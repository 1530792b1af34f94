
mod conformance_credentials;
mod conformance_platform;
mod support;
mod harness_selftest;
