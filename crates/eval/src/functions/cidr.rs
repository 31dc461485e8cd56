//! CIDR functions (`sys` namespace): `parseCidr`, `cidrSubnet` and `cidrHost` for IPv4 and IPv6. The zone
//! functions (`toLogicalZone(s)`, `toPhysicalZone(s)`) live in zones.rs and are registered here.

#[path = "zones.rs"]
mod zones;

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Object, Value};

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("parseCidr", 1, Some(1), parse_cidr),
    FunctionDef::eager("cidrSubnet", 3, Some(3), cidr_subnet),
    FunctionDef::eager("cidrHost", 2, Some(2), cidr_host),
    FunctionDef::eager("toLogicalZone", 3, Some(3), zones::to_logical_zone),
    FunctionDef::eager("toLogicalZones", 3, Some(3), zones::to_logical_zones),
    FunctionDef::eager("toPhysicalZone", 3, Some(3), zones::to_physical_zone),
    FunctionDef::eager("toPhysicalZones", 3, Some(3), zones::to_physical_zones),
];

/// An address range: the address as an integer of `bits` width and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Network {
    ipv6: bool,
    /// The network address (host bits cleared).
    network: u128,
    prefix: u32,
}

impl Network {
    fn bits(&self) -> u32 {
        if self.ipv6 { 128 } else { 32 }
    }

    fn all_ones(&self) -> u128 {
        if self.ipv6 {
            u128::MAX
        } else {
            u128::from(u32::MAX)
        }
    }

    /// The host part of the range: the low `bits - prefix` bits.
    fn host_mask(&self) -> u128 {
        let host_bits = self.bits() - self.prefix;
        if host_bits == 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        }
    }

    fn netmask(&self) -> u128 {
        self.all_ones() & !self.host_mask()
    }

    fn last(&self) -> u128 {
        self.network | self.host_mask()
    }

    /// The usable range. IPv4 reserves the network and broadcast addresses, except in /31 (point-to-point, RFC
    /// 3021) and /32 ranges; IPv6 has no broadcast, so the docs list the network address as first usable.
    fn usable(&self) -> (u128, u128) {
        if self.ipv6 || self.prefix >= 31 {
            (self.network, self.last())
        } else {
            (self.network + 1, self.last() - 1)
        }
    }

    fn format(&self, address: u128) -> String {
        if self.ipv6 {
            Ipv6Addr::from(address).to_string()
        } else {
            // IPv4 values never exceed 32 bits here.
            Ipv4Addr::from(address as u32).to_string()
        }
    }
}

fn parse_network(text: &str) -> Result<Network, FnError> {
    let invalid = || {
        FnError::msg(format!(
            "the value '{text}' is not a valid IPv4 or IPv6 address range in CIDR notation, such as '10.0.0.0/16' \
             or 'fdad:3236:5555::/48'."
        ))
    };
    let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
        return Err(invalid());
    }
    let prefix: u32 = prefix.parse().map_err(|_| invalid())?;
    let (ipv6, address) = if let Ok(v4) = address.parse::<Ipv4Addr>() {
        (false, u128::from(u32::from(v4)))
    } else if let Ok(v6) = address.parse::<Ipv6Addr>() {
        (true, u128::from(v6))
    } else {
        return Err(invalid());
    };
    let mut network = Network {
        ipv6,
        network: address,
        prefix,
    };
    if prefix > network.bits() {
        return Err(FnError::msg(format!(
            "the prefix length /{prefix} in '{text}' is larger than {}.",
            network.bits()
        )));
    }
    // Host bits of the given address are ignored: '10.144.1.5/20' is the range 10.144.0.0/20.
    network.network = address & network.netmask();
    Ok(network)
}

/// `parseCidr(network)` → `{ network, netmask, broadcast (IPv4 only), firstUsable, lastUsable, cidr }`.
fn parse_cidr(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let net = parse_network(args.string(0)?)?;
    let (first, last) = net.usable();
    let mut out = Object::with_capacity(6);
    out.insert("network", Value::String(net.format(net.network)));
    out.insert("netmask", Value::String(net.format(net.netmask())));
    if !net.ipv6 {
        out.insert("broadcast", Value::String(net.format(net.last())));
    }
    out.insert("firstUsable", Value::String(net.format(first)));
    out.insert("lastUsable", Value::String(net.format(last)));
    out.insert("cidr", Value::Int(i64::from(net.prefix)));
    Ok(Value::Object(out))
}

/// `cidrSubnet(network, newCidr, subnetIndex)` → the `subnetIndex`-th `/newCidr` range inside `network`.
fn cidr_subnet(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    let net = parse_network(text)?;
    let new_cidr = args.int(1)?;
    let index = args.int(2)?;
    if new_cidr < i64::from(net.prefix) || new_cidr > i64::from(net.bits()) {
        return Err(FnError::msg(format!(
            "the new CIDR {new_cidr} must be between {} (the prefix length of '{text}') and {}.",
            net.prefix,
            net.bits()
        )));
    }
    // In range by the check above.
    let new_cidr = new_cidr as u32;
    let split_bits = new_cidr - net.prefix;
    let count = (split_bits < 128).then(|| 1u128 << split_bits);
    let index_ok = index >= 0 && count.is_none_or(|c| (index as u128) < c);
    if !index_ok {
        let available = count.map_or_else(|| "2^128".to_string(), |c| c.to_string());
        return Err(FnError::msg(format!(
            "the subnet index {index} is out of range: '{text}' splits into {available} subnets of size /{new_cidr} \
             (indexes 0 to {available} - 1)."
        )));
    }
    let host_bits = net.bits() - new_cidr;
    let offset = if host_bits == 128 {
        0
    } else {
        (index as u128) << host_bits
    };
    Ok(Value::String(format!(
        "{}/{new_cidr}",
        net.format(net.network + offset)
    )))
}

/// `cidrHost(network, hostIndex)` → the usable host address at `hostIndex` (0 = the first usable address; for
/// IPv6 the address after the network address, as in the docs' `fdad:3236:5555:3000::1`).
fn cidr_host(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let text = args.string(0)?;
    let net = parse_network(text)?;
    let index = args.int(1)?;
    let (first, last) = if net.ipv6 {
        (net.network.checked_add(1), net.last())
    } else {
        let (first, last) = net.usable();
        (Some(first), last)
    };
    let host = first
        .filter(|_| index >= 0)
        .and_then(|f| f.checked_add(index as u128))
        .filter(|h| *h <= last);
    match host {
        Some(h) => Ok(Value::String(net.format(h))),
        None => {
            let usable = first.map_or(0, |f| {
                if f > last {
                    0
                } else {
                    (last - f).saturating_add(1)
                }
            });
            Err(FnError::msg(format!(
                "the host index {index} is out of range: '{text}' has {usable} usable host addresses."
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use crate::functions::test_util::{check, check_err, eval};
    use crate::value::Value;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #[test]
        fn ipv4_ranges_are_consistent(addr in any::<u32>(), prefix in 0u32..=32, index in -2i64..300) {
            let ip = Ipv4Addr::from(addr);
            let parsed = eval(&format!("parseCidr('{ip}/{prefix}')")).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let field = |k: &str| parsed.as_object().and_then(|o| o.get(k)).and_then(Value::as_str).map(str::to_string);
            let network = field("network").ok_or_else(|| TestCaseError::fail("network"))?;
            let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
            prop_assert_eq!(network.clone(), Ipv4Addr::from(addr & mask).to_string());
            let subnet = eval(&format!("cidrSubnet('{ip}/{prefix}', {prefix}, 0)")).ok();
            prop_assert_eq!(subnet, Some(Value::String(format!("{network}/{prefix}"))));
            // Any host index either fails cleanly or yields an address inside the range.
            if let Ok(Value::String(host)) = eval(&format!("cidrHost('{ip}/{prefix}', {index})")) {
                let host: Ipv4Addr = host.parse().map_err(|_| TestCaseError::fail("host address"))?;
                prop_assert_eq!(u32::from(host) & mask, addr & mask);
                prop_assert!(index >= 0);
            }
        }

        #[test]
        fn ipv6_subnets_stay_inside(addr in any::<u128>(), prefix in 0u32..=128, extra in 0u32..=8, index in 0i64..256) {
            let ip = Ipv6Addr::from(addr);
            let new_prefix = (prefix + extra).min(128);
            match eval(&format!("cidrSubnet('{ip}/{prefix}', {new_prefix}, {index})")) {
                Ok(Value::String(subnet)) => {
                    let (address, bits) = subnet.split_once('/').ok_or_else(|| TestCaseError::fail("slash"))?;
                    let address: Ipv6Addr = address.parse().map_err(|_| TestCaseError::fail("address"))?;
                    prop_assert_eq!(bits, new_prefix.to_string());
                    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
                    prop_assert_eq!(u128::from(address) & mask, addr & mask);
                }
                Ok(other) => prop_assert!(false, "unexpected {:?}", other),
                Err(_) => prop_assert!(u128::try_from(index).is_ok_and(|i| (new_prefix - prefix) < 128 && i >= 1u128 << (new_prefix - prefix))),
            }
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,40}") {
            let _ = eval(&format!("parseCidr('{}')", s.replace('\'', "''")));
        }
    }

    #[test]
    fn parse_cidr_docs_examples() {
        check(
            "parseCidr('10.144.0.0/20')",
            json!({
                "network": "10.144.0.0",
                "netmask": "255.255.240.0",
                "broadcast": "10.144.15.255",
                "firstUsable": "10.144.0.1",
                "lastUsable": "10.144.15.254",
                "cidr": 20
            }),
        );
        check(
            "parseCidr('fdad:3236:5555::/48')",
            json!({
                "network": "fdad:3236:5555::",
                "netmask": "ffff:ffff:ffff::",
                "firstUsable": "fdad:3236:5555::",
                "lastUsable": "fdad:3236:5555:ffff:ffff:ffff:ffff:ffff",
                "cidr": 48
            }),
        );
    }

    #[test]
    fn parse_cidr_edges() {
        check("parseCidr('10.144.1.5/20').network", json!("10.144.0.0"));
        check(
            "parseCidr('0.0.0.0/0')",
            json!({
                "network": "0.0.0.0",
                "netmask": "0.0.0.0",
                "broadcast": "255.255.255.255",
                "firstUsable": "0.0.0.1",
                "lastUsable": "255.255.255.254",
                "cidr": 0
            }),
        );
        check(
            "parseCidr('192.168.1.4/31')",
            json!({
                "network": "192.168.1.4",
                "netmask": "255.255.255.254",
                "broadcast": "192.168.1.5",
                "firstUsable": "192.168.1.4",
                "lastUsable": "192.168.1.5",
                "cidr": 31
            }),
        );
        check(
            "parseCidr('192.168.1.7/32').lastUsable",
            json!("192.168.1.7"),
        );
        check(
            "parseCidr('::/0').lastUsable",
            json!("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        );
        check(
            "parseCidr('2001:db8::1/128').firstUsable",
            json!("2001:db8::1"),
        );
    }

    #[test]
    fn parse_cidr_errors() {
        check_err(
            "parseCidr('10.144.0.0')",
            "not a valid IPv4 or IPv6 address range",
        );
        check_err(
            "parseCidr('10.144.0/20')",
            "not a valid IPv4 or IPv6 address range",
        );
        check_err(
            "parseCidr('10.144.0.256/20')",
            "not a valid IPv4 or IPv6 address range",
        );
        check_err(
            "parseCidr('10.144.0.0/-1')",
            "not a valid IPv4 or IPv6 address range",
        );
        check_err(
            "parseCidr('10.144.0.0/ 20')",
            "not a valid IPv4 or IPv6 address range",
        );
        check_err("parseCidr('10.144.0.0/33')", "larger than 32");
        check_err("parseCidr('fdad::/129')", "larger than 128");
        check_err("parseCidr('')", "not a valid IPv4 or IPv6 address range");
        check_err("parseCidr(20)", "must be of type 'String'");
    }

    #[test]
    fn cidr_subnet_docs_examples() {
        check("cidrSubnet('10.144.0.0/20', 24, 0)", json!("10.144.0.0/24"));
        check("cidrSubnet('10.144.0.0/20', 24, 1)", json!("10.144.1.0/24"));
        check("cidrSubnet('10.144.0.0/20', 24, 2)", json!("10.144.2.0/24"));
        check("cidrSubnet('10.144.0.0/20', 24, 3)", json!("10.144.3.0/24"));
        check("cidrSubnet('10.144.0.0/20', 24, 4)", json!("10.144.4.0/24"));
        check(
            "cidrSubnet('fdad:3236:5555::/48', 52, 0)",
            json!("fdad:3236:5555::/52"),
        );
        check(
            "cidrSubnet('fdad:3236:5555::/48', 52, 1)",
            json!("fdad:3236:5555:1000::/52"),
        );
        check(
            "cidrSubnet('fdad:3236:5555::/48', 52, 2)",
            json!("fdad:3236:5555:2000::/52"),
        );
        check(
            "cidrSubnet('fdad:3236:5555::/48', 52, 3)",
            json!("fdad:3236:5555:3000::/52"),
        );
        check(
            "cidrSubnet('fdad:3236:5555::/48', 52, 4)",
            json!("fdad:3236:5555:4000::/52"),
        );
    }

    #[test]
    fn cidr_subnet_edges_and_errors() {
        check(
            "cidrSubnet('10.144.0.0/20', 24, 15)",
            json!("10.144.15.0/24"),
        );
        check("cidrSubnet('10.144.0.0/20', 20, 0)", json!("10.144.0.0/20"));
        check(
            "cidrSubnet('10.144.0.0/20', 32, 4095)",
            json!("10.144.15.255/32"),
        );
        check("cidrSubnet('::/0', 128, 5)", json!("::5/128"));
        check("cidrSubnet('::/0', 1, 1)", json!("8000::/1"));
        check_err(
            "cidrSubnet('10.144.0.0/20', 24, 16)",
            "subnet index 16 is out of range",
        );
        check_err(
            "cidrSubnet('10.144.0.0/20', 24, -1)",
            "subnet index -1 is out of range",
        );
        check_err("cidrSubnet('10.144.0.0/20', 19, 0)", "must be between 20");
        check_err("cidrSubnet('10.144.0.0/20', 33, 0)", "and 32");
        check_err("cidrSubnet('fdad::/48', 129, 0)", "and 128");
        check_err(
            "cidrSubnet('10.144.0.0/20', '24', 0)",
            "must be of type 'Integer'",
        );
    }

    #[test]
    fn cidr_host_docs_examples() {
        check("cidrHost('10.144.3.0/24', 0)", json!("10.144.3.1"));
        check("cidrHost('10.144.3.0/24', 1)", json!("10.144.3.2"));
        check("cidrHost('10.144.3.0/24', 2)", json!("10.144.3.3"));
        check("cidrHost('10.144.3.0/24', 3)", json!("10.144.3.4"));
        check("cidrHost('10.144.3.0/24', 4)", json!("10.144.3.5"));
        check(
            "cidrHost('fdad:3236:5555:3000::/52', 0)",
            json!("fdad:3236:5555:3000::1"),
        );
        check(
            "cidrHost('fdad:3236:5555:3000::/52', 1)",
            json!("fdad:3236:5555:3000::2"),
        );
        check(
            "cidrHost('fdad:3236:5555:3000::/52', 2)",
            json!("fdad:3236:5555:3000::3"),
        );
        check(
            "cidrHost('fdad:3236:5555:3000::/52', 3)",
            json!("fdad:3236:5555:3000::4"),
        );
        check(
            "cidrHost('fdad:3236:5555:3000::/52', 4)",
            json!("fdad:3236:5555:3000::5"),
        );
        // The docs: index 0 is 192.168.1.1; index 3 is the first address Azure lets a VM use.
        check("cidrHost('192.168.1.0/24', 0)", json!("192.168.1.1"));
        check("cidrHost('192.168.1.0/24', 3)", json!("192.168.1.4"));
    }

    #[test]
    fn cidr_host_edges_and_errors() {
        check("cidrHost('192.168.1.0/24', 253)", json!("192.168.1.254"));
        check("cidrHost('192.168.1.4/31', 1)", json!("192.168.1.5"));
        check("cidrHost('192.168.1.7/32', 0)", json!("192.168.1.7"));
        check("cidrHost('fdad::/127', 0)", json!("fdad::1"));
        check_err(
            "cidrHost('192.168.1.0/24', 254)",
            "host index 254 is out of range",
        );
        check_err(
            "cidrHost('192.168.1.0/24', -1)",
            "host index -1 is out of range",
        );
        check_err(
            "cidrHost('192.168.1.7/32', 1)",
            "host index 1 is out of range",
        );
        check_err("cidrHost('fdad::/127', 1)", "host index 1 is out of range");
        check_err("cidrHost('fdad::1/128', 0)", "out of range");
        check_err(
            "cidrHost('nope', 0)",
            "not a valid IPv4 or IPv6 address range",
        );
    }
}
