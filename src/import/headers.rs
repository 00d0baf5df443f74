//! `add_header NAME VALUE [always]`: the location's `response_headers`.

use tollgate_nginx::Directive;

use super::level::Level;
use super::report::Status;
use super::values;
use crate::config::RESERVED_DOWN;


pub(super) fn setting(d: &Directive, own: &mut Level) -> Option<Status> {
    if d.name != "add_header" {
        return None;
    }
    let list = own.add_headers.get_or_insert_with(Vec::new);
    let (name, value, always) = match d.args.as_slice() {
        [name, value] => (name, value, false),
        [name, value, always] if always == "always" => (name, value, true),
        _ => return Some(Status::Unsupported("`add_header` takes a name, a value and `always`".to_owned())),
    };
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() || RESERVED_DOWN.contains(&name.to_ascii_lowercase().as_str()) {
        return Some(Status::Unsupported(format!("`{name}` cannot be set on an answer")));
    }
    if value.is_empty() {
        // nginx sends no header for an empty value.
        return Some(Status::Exact(Some("an empty value adds nothing".to_owned())));
    }
    if value.bytes().any(|b| b.is_ascii_control()) {
        return Some(Status::Unsupported("a control character in the value".to_owned()));
    }
    if let Err(why) = values::vars(value) {
        return Some(Status::Unsupported(why));
    }
    let mut differences = vec!["replaces the upstream's header of that name (nginx adds a second)".to_owned()];
    if list.iter().any(|(n, _, _)| n.eq_ignore_ascii_case(name)) {
        differences.push("a second value for the same name replaces the first (nginx sends both)".to_owned());
        list.retain(|(n, _, _)| !n.eq_ignore_ascii_case(name));
    }
    list.push((name.clone(), value.clone(), always));
    Some(Status::Approx(differences.join("; ")))
}
