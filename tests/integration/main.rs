mod check_auth;
mod check_verdicts;
mod cli;
mod conformance_credentials;
mod conformance_platform;
mod conformance_reference;
mod harness_selftest;
mod support;
