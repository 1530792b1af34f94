
mod conformance_credentials;
mod conformance_platform;
