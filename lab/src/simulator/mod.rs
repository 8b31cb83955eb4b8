//! The Azure OpenAI simulator's core: deployments, metering, faults and deterministic
//! completions, with an in-process `LlmClient` on any `Clock`; one file per concept
//! (`config`, `answer`, `simulator_core`, `completion`, `in_process`).
//!
//! [`SimulatorCore::decide`] turns one chat request at one instant into an
//! [`Outcome`]; the storm lab wraps it in [`InProcessSimulator`] (virtual time) and
//! `stormgate simulate` wraps the same core in an HTTP server (real time). Both meter
//! with [`stormgate_shared::metering`], so what the lab measures is what the HTTP tests see.
//!
//! Determinism: every random choice (faults, spikes) comes from a per-deployment
//! SplitMix64 stream seeded from the configuration's seed and the deployment name, so
//! the same sequence of requests gets the same answers.

mod answer;
mod completion;
mod config;
mod in_process;
mod simulator_core;

pub use answer::{
    ARRIVALS_KEPT, CHARGES_KEPT, CONTENT_FILTER_MESSAGE, DAILY_QUOTA_RETRY_AFTER,
    DEPLOYMENT_NOT_FOUND_MESSAGE, DeploymentStats, Outcome, SERVER_ERROR_MESSAGE, SimCompletion,
    SimulatorError, ThrottleAnswer, context_length_message,
};
pub use completion::{approximate_tokens, completion_text};
pub use config::{DeploymentConfig, Faults, HeaderVariant, Latency, SimulatorConfig};
pub use in_process::InProcessSimulator;
pub use simulator_core::SimulatorCore;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::completion::sentence_limit;
    use super::*;
    use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
    use stormgate_shared::llm::{ChatMessage, ChatRequest, HintSource, LlmClient, LlmError, Role};
    use stormgate_shared::metering;

    fn request(deployment: &str, user: &str, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            deployment: deployment.to_owned(),
            messages: vec![
                ChatMessage {
                    role: Role::System,
                    content: "Summarize the ticket in five sentences.".to_owned(),
                },
                ChatMessage {
                    role: Role::User,
                    content: user.to_owned(),
                },
            ],
            max_tokens,
            temperature: 0.0,
        }
    }

    const LOG: &str = "INC0010001 fibre cut north ring\n\
        2026-01-12T03:00:01Z RP/0/RP0/CPU0:ar1 LINK-3-UPDOWN: Interface HundredGigE0/0/0/1, changed state to Down\n\
        2026-01-12T03:00:02Z RP/0/RP0/CPU0:ar1 LINK-3-UPDOWN: Interface HundredGigE0/0/0/1, changed state to Down\n\
        2026-01-12T03:00:03Z RP/0/RP0/CPU0:ar1 BGP-5-ADJCHANGE: neighbor 10.0.0.2 Down - interface down\n\
        2026-01-12T03:10:00Z technician dispatched";

    #[test]
    fn completion_is_an_extractive_summary_of_the_user_content() {
        let (text, truncated) = completion_text(&request("premium", LOG, 300));
        assert!(!truncated);
        assert!(text.starts_with("INC0010001 fibre cut north ring."));
        assert!(text.contains("changed state to Down (seen 2 times)"));
        assert!(text.contains("BGP-5-ADJCHANGE"));
        assert!(text.ends_with("Latest: technician dispatched."));
        assert!(!text.contains("Summarize the ticket"));
    }

    /// A request built by the product's own prompt code, as the tier workers send it.
    fn product_request(kind: stormgate_shared::job::SummaryKind, body: &str) -> ChatRequest {
        let ticket = stormgate_shared::prompts::TicketText {
            number: "INC3010432".to_owned(),
            body: body.to_owned(),
        };
        stormgate_shared::prompts::ticket_request(
            stormgate_shared::prompts::current(kind),
            "standard",
            &[ticket],
        )
    }

    const TICKET_BODY: &str = "Number: INC3010432\n\
        State: New\n\
        Short description: val-cr43 intermittent packet loss reported\n\
        Alarm log (repeats collapsed):\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:26:35.837 : ifmgr[290]: %PKT_INFRA-LINK-3-UPDOWN : Interface HundredGigE0/0/0/8, changed state to Down [x11]\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:27:48.681 : envmon[159]: %PLATFORM-ENVMON-2-PSU_FAIL : Power module 0/PM0 failed: input voltage out of range\n\
        2026-01-12 11:28:55 val-cr43 mib2d[2589]: SNMP_TRAP_LINK_DOWN: ifIndex 515, ifName xe-8 [x13]\n\
        RP/0/RP0/CPU0:val-cr43 2026-01-12 11:36:41.924 : bgp[1050]: %ROUTING-BGP-5-ADJCHANGE : neighbor 10.19.20.80 Up (VRF: default)\n";

    #[test]
    fn completion_tells_alarms_by_their_message_and_never_quotes_the_prompts_markup() {
        let request = product_request(stormgate_shared::job::SummaryKind::Technician, TICKET_BODY);
        let (text, truncated) = completion_text(&request);
        assert!(!truncated);
        assert!(
            text.starts_with("val-cr43 intermittent packet loss reported."),
            "{text}"
        );
        assert!(
            text.contains("Power module 0/PM0 failed: input voltage out of range."),
            "{text}"
        );
        assert!(
            text.contains("Interface HundredGigE0/0/0/8, changed state to Down (seen 11 times)."),
            "{text}"
        );
        assert!(
            text.ends_with("Latest: neighbor 10.19.20.80 Up (VRF: default)."),
            "{text}"
        );
        for quoted in ["<ticket", "</ticket>", "ifmgr[", "2026-01-12", "%PKT_INFRA"] {
            assert!(!text.contains(quoted), "{quoted:?} quoted in {text}");
        }
    }

    #[test]
    fn completion_has_as_many_sentences_as_the_system_message_allows() {
        let sentences = |kind| {
            let (text, _) = completion_text(&product_request(kind, TICKET_BODY));
            text.matches(". ").count() + 1
        };
        // "at most five sentences" and "at most four sentences" in the product's prompts.
        assert_eq!(sentences(stormgate_shared::job::SummaryKind::Technician), 5);
        assert_eq!(sentences(stormgate_shared::job::SummaryKind::Customer), 4);
        // A prompt of facts only (a customer notice's) uses its sentences on the facts.
        let facts = "Number: INC3010432\nState: New\nRegion: valley\nCustomers affected: 2\n\
            Short description: val-cr43 intermittent packet loss reported\n";
        let (notice, _) = completion_text(&product_request(
            stormgate_shared::job::SummaryKind::Customer,
            facts,
        ));
        assert_eq!(
            notice,
            "val-cr43 intermittent packet loss reported. Customers affected: 2. Number: INC3010432. State: New."
        );
        assert_eq!(
            sentence_limit("Plain language, at most 3 sentences."),
            Some(3)
        );
        assert_eq!(
            sentence_limit("Summarize the ticket in five sentences."),
            None
        );
        assert_eq!(sentence_limit("at most five words"), None);
    }

    #[test]
    fn completion_fits_max_tokens_and_says_it_was_cut() {
        let (text, truncated) = completion_text(&request("premium", LOG, 20));
        assert!(truncated);
        assert!(approximate_tokens(&text) <= 20);
    }

    #[tokio::test]
    async fn in_process_client_meters_on_the_clock_and_sleeps_the_latency() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000);
        d.latency = Latency {
            first_token_ms: 500,
            per_output_token_ms: 10,
        };
        let core = Arc::new(SimulatorCore::new(&SimulatorConfig::new(7, vec![d])));
        let clock = ManualClock::starting_at(EpochMillis(1_000_000));
        let sim = InProcessSimulator::new(
            core.clone(),
            Arc::new(clock.clone()),
            Duration::from_secs(30),
        );
        let done = sim.complete(&request("premium", LOG, 200)).await.unwrap();
        let expected = 500 + 10 * done.usage.completion_tokens;
        assert_eq!(clock.now(), EpochMillis(1_000_000 + expected));
        assert_eq!(done.model, "gpt-4o");
        // The second call does not fit in the rest of the minute.
        let err = sim
            .complete(&request("premium", LOG, 900))
            .await
            .unwrap_err();
        let LlmError::RateLimited { hint, message } = err else {
            panic!("expected a 429, got {err:?}");
        };
        assert_eq!(hint.source, HintSource::RetryAfterMs);
        assert!(hint.wait.unwrap() > Duration::from_secs(50));
        assert!(message.contains("exceeded token rate limit"));
        assert_eq!(core.stats("premium").unwrap().throttled, 1);
    }

    #[test]
    fn same_seed_same_faults_other_seed_other_faults() {
        let faults = Faults {
            server_error_rate: 0.5,
            ..Faults::default()
        };
        let run = |seed: u64| {
            let mut d = DeploymentConfig::new("standard", "gpt-4o-mini", 10_000_000);
            d.faults = faults.clone();
            let core = SimulatorCore::new(&SimulatorConfig::new(seed, vec![d]));
            (0..64)
                .map(|i| {
                    matches!(
                        core.decide(&request("standard", LOG, 50), EpochMillis(i * 1_000)),
                        Outcome::ServerError { .. }
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        assert!(run(1).iter().any(|e| *e) && run(1).iter().any(|e| !*e));
    }

    #[test]
    fn daily_quota_mode_answers_86400_seconds() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000_000);
        d.faults.daily_quota_exhausted = true;
        d.faults.headers = HeaderVariant::RetryAfterOnly;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        let Outcome::Throttled(answer) = core.decide(&request("premium", LOG, 50), EpochMillis(0))
        else {
            panic!("expected a 429");
        };
        assert_eq!(
            answer.header_pairs(),
            vec![("retry-after", "86400".to_owned())]
        );
        assert_eq!(answer.hint().wait, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn another_application_on_the_deployment_shows_in_remaining_tokens_and_429s() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 60_000);
        d.faults.foreign_tokens_per_minute = 57_000;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        let t0 = EpochMillis(1_000_000);
        let Outcome::Success { completion, .. } = core.decide(&request("premium", LOG, 50), t0)
        else {
            panic!("3,000 tokens are left for us");
        };
        let charge = metering::arrival_charge(
            request("premium", LOG, 50)
                .messages
                .iter()
                .map(|m| m.content.chars().count() as u64)
                .sum(),
            50,
        );
        assert_eq!(completion.remaining_tokens, 3_000 - charge.get());
        // A call larger than what is left is refused, as Azure would.
        assert!(matches!(
            core.decide(&request("premium", LOG, 2_900), t0),
            Outcome::Throttled(_)
        ));
        // Ten seconds on, the other application has used 9,500 more: the window is full.
        let t1 = t0.plus(Duration::from_secs(10));
        assert!(matches!(
            core.decide(&request("premium", LOG, 50), t1),
            Outcome::Throttled(_)
        ));
        assert_eq!(
            core.tokens_in_window("premium", t1),
            Some(57_000 + 9_500 + charge.get())
        );
    }

    #[test]
    fn oversized_requests_exceed_the_context() {
        let mut d = DeploymentConfig::new("premium", "gpt-4o", 1_000_000);
        d.context_tokens = 100;
        let core = SimulatorCore::new(&SimulatorConfig::new(0, vec![d]));
        assert!(matches!(
            core.decide(&request("premium", LOG, 50), EpochMillis(0)),
            Outcome::ContextLengthExceeded { limit: 100, .. }
        ));
    }

    #[test]
    fn approximate_tokens_counts_words_numbers_and_punctuation() {
        assert_eq!(approximate_tokens(""), 0);
        assert_eq!(approximate_tokens("link down"), 2);
        assert_eq!(approximate_tokens("10.0.0.2"), 7);
        assert_eq!(approximate_tokens("HundredGigE0/0/0/1"), 3 + 7);
    }
}
