//! `[access]` and a location's `access` list: nginx's allow/deny rules over networks.

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Networks, RawAccess};
use super::{values, Access, AccessRule};

pub(super) fn access(raw: RawAccess, diag: &mut Diagnostics<'_>) -> Option<Access> {
    let deny = networks(raw.deny.as_ref(), diag);
    let exempt = networks(raw.exempt.as_ref(), diag);
    Some(Access {
        deny: deny?,
        exempt: exempt?,
    })
}

pub(super) fn networks(list: Option<&Networks>, diag: &mut Diagnostics<'_>) -> Option<Vec<ipnet::IpNet>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let nets: Vec<_> = list
        .get_ref()
        .iter()
        .map(|item| diag.check(item.span(), values::network(item.get_ref())))
        .collect();
    nets.into_iter().collect()
}

/// nginx allow/deny rules: `"allow ADDR[/BITS]"`, `"deny ADDR[/BITS]"`, `"allow all"`,
/// `"deny all"`.
pub(super) fn access_rules(
    list: &Spanned<Vec<Spanned<String>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<AccessRule>> {
    let rules: Vec<_> = list
        .get_ref()
        .iter()
        .map(|item| diag.check(item.span(), access_rule(item.get_ref())))
        .collect();
    rules.into_iter().collect()
}

pub(super) fn access_rule(text: &str) -> Result<AccessRule, String> {
    let hint = || {
        format!(
            r#"invalid access rule "{text}": expected "allow CIDR", "deny CIDR", "allow all" or "deny all""#
        )
    };
    let (verb, target) = text
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(hint)?;
    let allow = match verb {
        "allow" => true,
        "deny" => false,
        _ => return Err(hint()),
    };
    let target = target.trim();
    let net = match target {
        "all" => None,
        _ => Some(values::network(target)?),
    };
    Ok(AccessRule { allow, net })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rules_are_allow_or_deny_of_a_network_or_all() {
        let rule = access_rule("deny 10.0.0.13").expect("valid");
        assert!(!rule.allow && rule.net == Some("10.0.0.13/32".parse().expect("net")));
        assert_eq!(
            access_rule("allow all"),
            Ok(AccessRule {
                allow: true,
                net: None
            })
        );
        assert!(access_rule("permit all").is_err());
        assert!(access_rule("deny").is_err());
        assert!(access_rule("deny 10.0.0.0/33").is_err());
    }
}
