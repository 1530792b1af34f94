
mod conformance_platform;
