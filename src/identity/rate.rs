//! Rate limits per principal (per client address when anonymous): a
//! generic cell rate per key, `rate_limit_per_second` with bursts of
//! `rate_limit_burst`; a client's address as its trusted proxies say.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

/// Checks between two sweeps of keys whose limit has fully recovered (the
/// table of keys stays as small as the set of recent callers).
const SWEEP_EVERY: u64 = 4096;

/// One limiter for every caller.
#[derive(Debug)]
pub struct RateLimits {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    checks: AtomicU64,
}

impl RateLimits {
    /// `per_second` requests per second with bursts of `burst` (at least
    /// one; the rate rounded up when unset).
    pub fn new(per_second: f64, burst: Option<u32>) -> Result<Self, String> {
        if !(per_second > 0.0 && per_second < 1e9) {
            return Err(format!(
                "invalid rate_limit_per_second {per_second}: expected a number above 0"
            ));
        }
        let burst = burst.unwrap_or(per_second.ceil() as u32);
        let burst = NonZeroU32::new(burst).ok_or("invalid rate_limit_burst 0: expected at least 1")?;
        let quota = Quota::with_period(Duration::from_secs_f64(1.0 / per_second))
            .ok_or_else(|| format!("invalid rate_limit_per_second {per_second}"))?
            .allow_burst(burst);
        Ok(Self {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            clock: DefaultClock::default(),
            checks: AtomicU64::new(0),
        })
    }

    /// Count one request of `key`; `Err` says how long until it may ask again.
    pub fn check(&self, key: String) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// The proxies whose `X-Forwarded-For` is believed (`trusted_proxies`):
/// addresses and CIDR blocks.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl TrustedProxies {
    /// Parse `["10.0.0.0/8", "127.0.0.1", "fd00::/8"]`.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let one = |item: &String| -> Result<(IpAddr, u8), String> {
            let bad = || format!("invalid trusted_proxies entry '{item}': expected an IP address or CIDR block");
            let (addr, bits) = item.split_once('/').unwrap_or((item, ""));
            let addr: IpAddr = addr.trim().parse().map_err(|_| bad())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let bits = if bits.is_empty() {
                max
            } else {
                bits.parse().map_err(|_| bad())?
            };
            if bits > max {
                return Err(bad());
            }
            Ok((addr, bits))
        };
        items.iter().map(one).collect::<Result<_, _>>().map(Self)
    }

    fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|(net, bits)| within(ip, *net, *bits))
    }

    /// The rate-limit key of a client: the connection's peer, or, when the
    /// peer is a trusted proxy, the address that proxy appended last to
    /// `forwarded` (`X-Forwarded-For`) that is not itself a trusted proxy.
    /// An IPv6 client is keyed by its /64 (one host holds them all).
    pub fn client_key(&self, peer: Option<IpAddr>, forwarded: Option<&str>) -> String {
        let mut client = peer;
        if peer.is_some_and(|p| self.contains(p)) {
            let hops = forwarded
                .unwrap_or_default()
                .rsplit(',')
                .map(|a| a.trim().parse::<IpAddr>());
            for hop in hops {
                match hop {
                    Ok(ip) if self.contains(ip) => client = Some(ip),
                    Ok(ip) => {
                        client = Some(ip);
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        match client {
            Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
                let s = v6.segments();
                format!("addr:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
            Some(IpAddr::V6(v6)) => format!("addr:{}", v6.to_ipv4_mapped().expect("mapped")),
            Some(ip) => format!("addr:{ip}"),
            None => "addr:unknown".into(),
        }
    }
}

/// Whether `ip` lies in `net`/`bits`.
fn within(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (ip, net, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let shift = width - u32::from(bits);
    shift >= 128 || (ip >> shift) == (net >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds_per_key() {
        let limits = RateLimits::new(1.0, Some(3)).unwrap();
        for _ in 0..3 {
            assert!(limits.check("a".into()).is_ok());
        }
        let wait = limits.check("a".into()).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1), "{wait:?}");
        assert!(limits.check("b".into()).is_ok(), "another key has its own budget");
        assert!(RateLimits::new(0.0, None).is_err());
        assert!(RateLimits::new(2.0, Some(0)).is_err());
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8".into(), "127.0.0.1".into()]).unwrap();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        // From a trusted proxy: the last address it did not add itself.
        assert_eq!(
            proxies.client_key(ip("10.1.2.3"), Some("1.2.3.4, 5.6.7.8")),
            "addr:5.6.7.8"
        );
        assert_eq!(
            proxies.client_key(ip("10.1.2.3"), Some("5.6.7.8, 10.9.9.9")),
            "addr:5.6.7.8"
        );
        assert_eq!(proxies.client_key(ip("10.1.2.3"), None), "addr:10.1.2.3");
        // From anyone else the header is ignored: it could name any address.
        assert_eq!(
            proxies.client_key(ip("192.168.1.5"), Some("5.6.7.8")),
            "addr:192.168.1.5"
        );
        assert_eq!(
            TrustedProxies::default().client_key(ip("127.0.0.1"), Some("5.6.7.8")),
            "addr:127.0.0.1"
        );
        // One IPv6 host is one /64.
        assert_eq!(
            proxies.client_key(ip("2001:db8:1:2:aaaa::1"), None),
            "addr:2001:db8:1:2::/64"
        );
        assert_eq!(proxies.client_key(ip("::ffff:9.9.9.9"), None), "addr:9.9.9.9");
        for bad in ["10.0.0.0/33", "nope", "::/129"] {
            assert!(TrustedProxies::parse(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
