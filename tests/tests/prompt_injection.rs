//! Security: a corpus of prompt-injection attempts (tests/fixtures/security/
//! prompt_injections.json) planted in ServiceNow ticket text — the description, a work
//! note, an alarm line, some short descriptions — sent through the real pipeline
//! (classify on the handler process, dispatch, the tier functions against the simulator).
//!
//! On the wire, every request the simulator receives carries exactly the template's
//! system message (nothing of any ticket in it) and one user message in which ticket
//! text appears only inside `<ticket number="...">` blocks it cannot close, forge or
//! escape. The simulator answers like a careless model (it quotes the ticket's lines),
//! and still no customer notice carries an address, host, contact or person the
//! tickets or the injections name: the leak scrubber holds whatever the ticket says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::BTreeMap;

use fault_rig::{Rig, RigOptions, request_kind};
use serde_json::Value;
use stormgate_e2e::recording_proxy::Exchange;
use stormgate_e2e::tickets::{event, ticket};
use stormgate_lab::simulator::completion_text;
use stormgate_shared::job::SummaryKind;
use stormgate_shared::llm::{ChatMessage, ChatRequest, Role};
use stormgate_shared::prompts::{self, neutralise_delimiters};
use stormgate_shared::scrubber::{ScrubContext, find_leaks};
use stormgate_shared::store::Store;

const CORPUS: &str = include_str!("../fixtures/security/prompt_injections.json");

/// What must never reach a customer, from the tickets and from the injections.
const PLANTED: &[&str] = &[
    "10.66.1.1",
    "10.20.",
    "2001:db8",
    "example.net",
    "555 01",
    "555 0199",
    "7946 0958",
    "noc@",
    "Jane",
    "Roe",
    "Wei Chen",
    "Pat Smith",
    "ams-agg",
    "NOC Tier 2",
];

fn attempts() -> Vec<String> {
    let corpus: Value = serde_json::from_str(CORPUS).unwrap();
    corpus["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Ticket `n` of a three-ticket outage, with `attempt` in its description, a work note
/// and its alarm log, and every fourth ticket in its short description as well.
fn poisoned(n: u16, attempt: &str) -> Value {
    let mut e = event(n, n.div_ceil(3), 1);
    let text = |field: &str| e[field].as_str().unwrap_or_default().to_owned();
    let description = format!("{} {attempt}", text("description"));
    let work_notes = format!(
        "2027-01-15 08:25:00 - Pat Smith (Work notes)\n{attempt}\n\n{}",
        text("work_notes")
    );
    let alarm_log = format!("{}\n{attempt}", text("u_alarm_log"));
    e["description"] = description.into();
    e["work_notes"] = work_notes.into();
    e["u_alarm_log"] = alarm_log.into();
    if n.is_multiple_of(4) {
        e["short_description"] = attempt.lines().next().unwrap_or(attempt).into();
    }
    e
}

/// The user message with every `<ticket number="...">...</ticket>` block removed.
fn outside_blocks(user: &str) -> String {
    let mut rest = user;
    let mut outside = String::new();
    while let Some(open) = rest.find("<ticket number=\"") {
        outside.push_str(&rest[..open]);
        let close = rest[open..]
            .find("</ticket>")
            .expect("every block is closed")
            + open;
        rest = &rest[close + "</ticket>".len()..];
    }
    outside.push_str(rest);
    outside
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_ticket_text_travels_only_as_delimited_data_and_notices_stay_scrubbed() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let attempts = attempts();
    assert!(attempts.len() >= 10, "the corpus is the point of this test");
    let events: Vec<Value> = attempts
        .iter()
        .enumerate()
        .map(|(i, a)| poisoned(i as u16 + 1, a))
        .collect();
    let expected = Rig::expected_jobs(&events);
    let all = rig.topic.produce(events.clone());
    assert_eq!(rig.classify(all).await["accepted"], events.len());
    rig.settle(10).await;
    rig.assert_every_job_settled(&expected).await;

    let system_messages: BTreeMap<SummaryKind, String> = SummaryKind::ALL
        .into_iter()
        .map(|kind| {
            let request = prompts::ticket_request(prompts::current(kind), "", &[]);
            (kind, request.messages[0].content.clone())
        })
        .collect();
    let mut seen = BTreeMap::new();
    let exchanges = rig.llm.exchanges();
    assert!(!exchanges.is_empty());
    for exchange in &exchanges {
        let roles: Vec<&str> = exchange.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user"], "{}", exchange.body);
        let kind = request_kind(exchange).expect("a template's system message");
        assert_eq!(
            exchange.system(),
            system_messages[&kind],
            "the system message is the template's, nothing else"
        );
        let user = exchange.user();
        let blocks = exchange.ticket_blocks();
        assert_eq!(user.matches("<ticket number=\"").count(), blocks.len());
        assert_eq!(user.matches("</ticket>").count(), blocks.len(), "{user}");
        let outside = outside_blocks(user);
        let header = format!("{} related tickets of one outage follow.", blocks.len());
        assert!(
            outside.trim().is_empty() || outside.trim() == header,
            "text outside the ticket blocks: {outside:?}"
        );
        for (number, body) in &blocks {
            assert!(
                number.starts_with("INC00100") && number.len() == 10,
                "a forged block number: {number}"
            );
            assert!(
                !body.contains('<') && !body.contains('>'),
                "a block can hold no delimiter of its own: {body}"
            );
            seen.insert(number.clone(), body.clone());
        }
    }
    // Each attempt did travel, as data inside its own ticket's block.
    for (i, attempt) in attempts.iter().enumerate() {
        let number = format!("INC{:07}", 10_001 + i);
        let body = seen
            .get(&number)
            .unwrap_or_else(|| panic!("{number} never sent"));
        let first_line = neutralise_delimiters(attempt.lines().next().unwrap());
        assert!(
            body.contains(first_line.trim()),
            "{number}: {first_line:?} not in its block"
        );
    }

    // The simulator answered like a careless model: what it said for the customer
    // notices quoted the planted contacts and hosts, so the scrubber had work to do.
    let leaky_answers = exchanges
        .iter()
        .filter(|e| request_kind(e) == Some(SummaryKind::Customer))
        .filter(|e| {
            let answer = completion_text(&chat_request(e)).0;
            PLANTED.iter().any(|p| answer.contains(p))
        })
        .count();
    assert!(leaky_answers > 0, "the model never repeated a planted leak");

    // Customer notices, and the stored customer summaries, leak nothing.
    let notices = &rig.host.notices;
    assert!(!notices.is_empty());

    // A notice speaks for every ticket it names: it leaks nothing of any of them.
    for notice in notices {
        for named in notice["tickets"].as_array().unwrap() {
            let sys_id = named["ticket"].as_str().unwrap();
            let event = events.iter().find(|e| e["sys_id"] == sys_id).unwrap();
            assert_leak_free(notice["text"].as_str().unwrap(), event);
        }
    }
    for event in &events {
        let id = event["sys_id"].as_str().unwrap().parse().unwrap();
        if let Some(summary) = rig.store.summary(&id, SummaryKind::Customer).await.unwrap() {
            assert_leak_free(&summary.text, event);
        }
    }
}

/// The request as the simulator decoded it.
fn chat_request(exchange: &Exchange) -> ChatRequest {
    ChatRequest {
        deployment: exchange.deployment.clone(),
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: exchange.system().to_owned(),
            },
            ChatMessage {
                role: Role::User,
                content: exchange.user().to_owned(),
            },
        ],
        max_tokens: exchange.body["max_tokens"].as_u64().unwrap_or(200) as u32,
        temperature: 0.0,
    }
}

fn assert_leak_free(text: &str, event: &Value) {
    let context = ScrubContext::from_ticket(&ticket(event));
    assert_eq!(find_leaks(text, &context), vec![], "{text}");
    for planted in PLANTED {
        assert!(!text.contains(planted), "{planted} leaked: {text}");
    }
}
