//! `allow` / `deny` (a location's `access` list) and the realip module
//! (`set_real_ip_from`, `real_ip_header`, `real_ip_recursive`: `[real_ip]`).

use tollgate_nginx::Directive;

use super::level::{Context, Level};
use super::report::Status;
use super::values;
use super::state::Walk;

pub(super) fn setting(
    w: &mut Walk<'_>,
    d: &Directive,
    own: &mut Level,
    context: Context,
) -> Option<Status> {
    let args = d.args.as_slice();
    let gateway_wide = match context {
        Context::Http => None,
        _ => Some("tollgate's `[real_ip]` is the whole gateway's: it applies to every site".to_owned()),
    };
    let status = match (d.name.as_str(), args) {
        ("allow" | "deny", [who]) => {
            let list = own.access.get_or_insert_with(Vec::new);
            if who.starts_with("unix:") {
                return Some(Status::Approx("`unix:` left out: tollgate listens on TCP only".to_owned()));
            }
            if who != "all" && network(who).is_none() {
                return Some(Status::Unsupported(format!("`{who}` is not an address or network")));
            }
            list.push(format!("{} {who}", d.name));
            return Some(Status::Exact(None));
        }
        ("set_real_ip_from", [from]) => match network(from) {
            Some(net) => {
                if !w.build.real_ip_trusted.contains(&net) {
                    w.build.real_ip_trusted.push(net);
                }
                Status::Exact(None)
            }
            None => return Some(Status::Unsupported(format!("`{from}`: an address or network (tollgate has no `unix:`)"))),
        },
        ("real_ip_header", [header]) if header == "proxy_protocol" => {
            w.build.real_ip_header.get_or_insert_with(|| header.clone());
            return Some(Status::Exact(Some("`set_real_ip_from` becomes `[server] proxy_protocol_from`".to_owned())));
        }
        ("real_ip_header", [header]) => {
            w.build.real_ip_header.get_or_insert_with(|| header.clone());
            Status::Exact(None)
        }
        ("real_ip_recursive", [flag]) => match values::flag(flag) {
            Some(on) => {
                w.build.real_ip_recursive.get_or_insert(on);
                Status::Exact(None)
            }
            None => return Some(Status::Unsupported(format!("`{flag}`: on or off"))),
        },
        _ => return None,
    };
    Some(match gateway_wide {
        Some(why) => Status::Approx(why),
        None => status,
    })
}

/// An address or CIDR as tollgate takes it.
fn network(text: &str) -> Option<String> {
    let ok = text.parse::<ipnet::IpNet>().is_ok() || text.parse::<std::net::IpAddr>().is_ok();
    ok.then(|| text.to_owned())
}
