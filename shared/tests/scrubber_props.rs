//! Property test of the leak scrubber: whatever plain text surrounds them, and whether or
//! not the sentence carrying them was copied from the ticket's internal text, no fragment
//! of a scrubbed IP address, host name, e-mail address or phone number survives.
//!
//! The plain words around the planted items carry no digit, no `@` and no `:`, and every
//! label of a planted item is a word no plain sentence uses: so a digit, an `@`, a `:` or
//! one of those labels in the output can only be a fragment of something planted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use proptest::prelude::*;
use proptest::test_runner::Config;
use stormgate_shared::scrubber::{ScrubContext, find_leaks, scrub};

const PLAIN: &[&str] = &[
    "service",
    "customers",
    "outage",
    "north",
    "region",
    "restore",
    "engineers",
    "working",
    "update",
    "internet",
    "the",
    "in",
    "is",
    "our",
    "to",
    "with",
    "of",
    "near",
    "reported",
    "link",
    "router",
    "crew",
    "splice",
    "confirmed",
    "please",
    "call",
    "or",
    "write",
    "down",
];

const TOP_LEVEL: &[&str] = &["net", "com", "org", "io"];

/// A planted item: its text, the labels (words) it is made of, and the person it names
/// when it is someone's e-mail address.
#[derive(Debug, Clone)]
struct Planted {
    text: String,
    labels: Vec<String>,
    person: Option<String>,
}

fn label() -> impl Strategy<Value = String> {
    ("[a-z]{2,5}", 0u8..100).prop_map(|(letters, n)| format!("{letters}{n}"))
}

fn host() -> impl Strategy<Value = Planted> {
    (
        prop::collection::vec(label(), 1..4),
        prop::sample::select(TOP_LEVEL),
    )
        .prop_map(|(mut labels, top)| {
            let text = format!("{}.{top}", labels.join("."));
            labels.push(top.to_owned());
            Planted {
                text,
                labels,
                person: None,
            }
        })
}

fn ipv4() -> impl Strategy<Value = Planted> {
    (prop::array::uniform4(0u8..=255), prop::option::of(8u8..=32)).prop_map(|(octets, prefix)| {
        let mut text = octets.map(|o| o.to_string()).join(".");
        if let Some(p) = prefix {
            text.push_str(&format!("/{p}"));
        }
        Planted {
            text,
            labels: Vec::new(),
            person: None,
        }
    })
}

fn ipv6() -> impl Strategy<Value = Planted> {
    (
        prop::collection::vec(1u16..=0xffff, 1..4),
        prop::collection::vec(1u16..=0xffff, 1..3),
    )
        .prop_map(|(head, tail)| {
            let hex = |groups: &[u16]| {
                groups
                    .iter()
                    .map(|g| format!("{g:x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            };
            Planted {
                text: format!("2001:db8:{}::{}", hex(&head), hex(&tail)),
                labels: Vec::new(),
                person: None,
            }
        })
}

fn email() -> impl Strategy<Value = Planted> {
    (label(), prop::option::of(label()), host()).prop_map(|(user, second, host)| {
        let local = match &second {
            Some(second) => format!("{user}.{second}"),
            None => user.clone(),
        };
        let mut labels = vec![user];
        labels.extend(second);
        labels.extend(host.labels);
        Planted {
            text: format!("{local}@{}", host.text),
            labels,
            person: None,
        }
    })
}

/// A person's name; the `zq` prefix keeps it apart from the plain words.
fn name() -> impl Strategy<Value = String> {
    "[a-z]{2,6}".prop_map(|letters| format!("zq{letters}"))
}

/// A person the ticket names, at their own e-mail address (`first.last@host`): the
/// name is scrubbed as a person and the address as an address, and neither may leave
/// a piece of the other behind.
fn personal_email() -> impl Strategy<Value = Planted> {
    (name(), name(), host()).prop_map(|(first, last, host)| {
        let mut labels = vec![first.clone(), last.clone()];
        labels.extend(host.labels);
        Planted {
            text: format!("{first}.{last}@{}", host.text),
            labels,
            person: Some(format!("{first} {last}")),
        }
    })
}

fn phone() -> impl Strategy<Value = Planted> {
    (
        10u8..100,
        10u8..100,
        100u16..1000,
        1000u16..10_000,
        0usize..5,
    )
        .prop_map(|(country, area, exchange, line, format)| {
            let text = match format {
                0 => format!("+{country} {area} {exchange} {line}"),
                1 => format!("(0{area}) {exchange}-{line}"),
                2 => format!("0{area}.{exchange}.{line}"),
                3 => format!("0{area}-{exchange}-{line}"),
                _ => format!("+{country}.{area}.{exchange}.{line}"),
            };
            Planted {
                text,
                labels: Vec::new(),
                person: None,
            }
        })
}

fn planted() -> impl Strategy<Value = Planted> {
    prop_oneof![host(), ipv4(), ipv6(), email(), personal_email(), phone()]
}

/// One sentence: plain words with planted items among them, some wrapped in punctuation,
/// the last word followed by the sentence's end.
fn sentence() -> impl Strategy<Value = (String, Vec<Planted>)> {
    (
        prop::collection::vec(prop::sample::select(PLAIN), 3..10),
        prop::collection::vec((planted(), 0usize..10, 0usize..5), 0..3),
        prop::sample::select(&[".", "!", "?", ";", ""][..]),
    )
        .prop_map(|(words, items, end)| {
            let mut parts: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
            let mut planted = Vec::new();
            for (item, at, wrap) in items {
                let text = match wrap {
                    0 => format!("({})", item.text),
                    1 => format!("{},", item.text),
                    2 => format!("{};", item.text),
                    3 => format!("\"{}\"", item.text),
                    _ => item.text.clone(),
                };
                parts.insert(at.min(parts.len()), text);
                planted.push(item);
            }
            let mut text = parts.join(" ");
            text.push_str(end);
            (text, planted)
        })
}

fn fragments_left(output: &str, planted: &[Planted]) -> Vec<String> {
    let mut left: Vec<String> = output
        .chars()
        .filter(|c| c.is_ascii_digit() || matches!(c, '@' | ':'))
        .map(String::from)
        .collect();
    let words: Vec<String> = output
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    for item in planted {
        for label in &item.labels {
            if words.contains(label) {
                left.push(label.clone());
            }
        }
    }
    left
}

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn no_fragment_of_a_planted_address_host_or_number_survives(
        sentences in prop::collection::vec(sentence(), 1..5),
        copied in prop::collection::vec(any::<bool>(), 5),
    ) {
        let text: Vec<&str> = sentences.iter().map(|(s, _)| s.as_str()).collect();
        let planted: Vec<Planted> = sentences.iter().flat_map(|(_, p)| p.clone()).collect();
        // Some sentences were copied from the ticket's work notes: the scrubber drops those.
        let internal: Vec<&str> = text
            .iter()
            .zip(&copied)
            .filter(|(_, copied)| **copied)
            .map(|(s, _)| *s)
            .collect();
        let people: Vec<String> = planted.iter().filter_map(|p| p.person.clone()).collect();
        let ctx = ScrubContext::new(people, Vec::new(), &internal);
        let input = text.join(" ");
        let scrubbed = scrub(&input, &ctx);
        let left = fragments_left(&scrubbed.text, &planted);
        prop_assert!(left.is_empty(), "{left:?} left in {:?} (from {input:?})", scrubbed.text);
        prop_assert_eq!(find_leaks(&scrubbed.text, &ctx), Vec::new());
    }
}

#[test]
fn an_address_inside_a_copied_sentence_leaves_no_fragment() {
    let internal = "BGP to 10.1.2.3 went down on the link to the core router in the north";
    let ctx = ScrubContext::new(Vec::new(), Vec::new(), &[internal]);
    let scrubbed = scrub(
        &format!("Service is degraded. {internal}. We will update you."),
        &ctx,
    );
    assert_eq!(scrubbed.text, "Service is degraded. We will update you.");
}
