//! Variables in a `return`: parsed when the file is read, each problem at its place.

use super::*;

#[test]
fn a_return_with_variables_parses_and_keeps_them() {
    let config = parse(&format!(
        "{SERVER}[[location]]\nmatch = \"~ ^/old/(.*)$\"\n\
         return = {{ status = 301, location = \"https://$host/new/$1?$args\", body = \"${{scheme}}\" }}\n"
    ));
    let Action::Return(ret) = &config.sites[0].locations[0].action else {
        panic!("a return");
    };
    let location = ret.location.as_ref().expect("a location");
    assert_eq!(location.to_string(), "https://${host}/new/$1?${args}");
    assert_eq!(ret.body.to_string(), "${scheme}");
}

#[test]
fn unknown_variables_and_stray_captures_are_reported_where_they_are() {
    let found = errors(&format!(
        "{SERVER}[[location]]\nmatch = \"/a\"\nreturn = {{ status = 301, location = \"https://$hots$uri\" }}\n\
         [[location]]\nmatch = \"/b\"\nreturn = {{ status = 200, body = \"x $\" }}\n\
         [[location]]\nmatch = \"/c\"\nreturn = {{ status = 301, location = \"/$1\" }}\n\
         [[location]]\nmatch = \"~ ^/d/(.*)$\"\nreturn = {{ status = 301, location = \"/$2\" }}\n"
    ));
    let found: Vec<(usize, usize, &str)> =
        found.iter().map(|(l, c, m)| (*l, *c, m.as_str())).collect();
    assert_eq!(found.len(), 4, "{found:#?}");
    assert_eq!((found[0].0, found[0].1), (5, 46), "{found:#?}");
    assert!(
        found[0].2.starts_with("unknown variable `$hots`"),
        "{found:#?}"
    );
    assert_eq!((found[1].0, found[1].1), (8, 36), "{found:#?}");
    assert!(
        found[1].2.starts_with("a variable needs a name"),
        "{found:#?}"
    );
    assert_eq!(found[2].0, 11);
    assert!(found[2]
        .2
        .starts_with("captures ($1 to $9) need a regex location"));
    assert_eq!(found[3].0, 14);
    assert_eq!(
        found[3].2,
        "`$2`: the location's regex has 1 capture group(s)"
    );
}
