//! Loopback ports for servers the tests start (docker-registry, the webhook, kube-apiserver
//! helpers), drawn below the kernel's ephemeral range.
//!
//! Binding port 0 and releasing it hands the child a port from the ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768-60999 by default), which any outgoing connection
//! may take before the child binds it: CI saw etcd fail with "bind: address already in use"
//! that way (scripts/lib.sh `free_port` follows the same rule). Below the range only another
//! caller of this function can take the port; within one process a counter never hands out
//! the same port twice, and the start is spread by the process id across processes.
//! Shared by tests/integration and tests/cluster (`#[path]`).

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port this module hands out.
const LOW: u16 = 10_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The first ephemeral port: `/proc/sys/net/ipv4/ip_local_port_range`'s first field
/// (32768 when unreadable), never below `LOW + 1000`.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(32_768u16)
        .max(LOW + 1000)
}

/// A port on `addr` that nothing held when it was tried (bound without SO_REUSEADDR, so a
/// connected socket on it counts too), in `LOW..ephemeral_low()`.
/// Errors: every port of the span was tried and taken.
pub fn free_port_on(addr: IpAddr) -> std::io::Result<u16> {
    let span = u32::from(ephemeral_low() - LOW);
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOW + ((start + n) % span) as u16;
        if TcpListener::bind((addr, port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no free port on {addr} in {LOW}-{}", ephemeral_low() - 1),
    ))
}

/// [`free_port_on`] 127.0.0.1.
pub fn free_port() -> std::io::Result<u16> {
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_repeat() {
        let low = super::ephemeral_low();
        let a: Vec<u16> = (0..50).map(|_| super::free_port().unwrap()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), a.len(), "a port was handed out twice: {a:?}");
        assert!(
            a.iter().all(|p| (super::LOW..low).contains(p)),
            "{a:?} not in {}..{low}",
            super::LOW
        );
    }
}
