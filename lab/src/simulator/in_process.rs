//! The simulator as an in-process [`LlmClient`] on any clock: what the storm lab calls.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::answer::{
    CONTENT_FILTER_MESSAGE, DEPLOYMENT_NOT_FOUND_MESSAGE, Outcome, SERVER_ERROR_MESSAGE,
    context_length_message,
};
use super::simulator_core::SimulatorCore;
use stormgate_shared::clock::Clock;
use stormgate_shared::llm::{ChatRequest, Completion, LlmClient, LlmError, RateLimitView};
/// The simulator as an in-process [`LlmClient`] on `clock`: requests are metered at
/// the clock's now and answered after the simulated latency, slept on the same clock.
#[derive(Debug, Clone)]
pub struct InProcessSimulator {
    core: Arc<SimulatorCore>,
    clock: Arc<dyn Clock>,
    /// How long the caller waits before calling a hung request a timeout.
    client_timeout: Duration,
}

impl InProcessSimulator {
    pub fn new(core: Arc<SimulatorCore>, clock: Arc<dyn Clock>, client_timeout: Duration) -> Self {
        InProcessSimulator {
            core,
            clock,
            client_timeout,
        }
    }

    pub fn core(&self) -> &Arc<SimulatorCore> {
        &self.core
    }
}

#[async_trait]
impl LlmClient for InProcessSimulator {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let outcome = self.core.decide(request, self.clock.now());
        match outcome {
            Outcome::Success {
                completion,
                latency,
            } => {
                self.clock.sleep(latency.min(self.client_timeout)).await;
                if latency > self.client_timeout {
                    return Err(LlmError::Timeout);
                }
                Ok(Completion {
                    text: completion.text,
                    model: completion.model,
                    usage: completion.usage,
                    rate_limit: RateLimitView {
                        remaining_tokens: Some(completion.remaining_tokens),
                        remaining_requests: Some(completion.remaining_requests),
                    },
                })
            }
            Outcome::Throttled(answer) => Err(LlmError::RateLimited {
                hint: answer.hint(),
                message: answer.message(),
            }),
            Outcome::ServerError { latency } => {
                self.clock.sleep(latency.min(self.client_timeout)).await;
                Err(LlmError::Server {
                    status: 500,
                    message: SERVER_ERROR_MESSAGE.to_owned(),
                })
            }
            Outcome::Timeout => {
                self.clock.sleep(self.client_timeout).await;
                Err(LlmError::Timeout)
            }
            Outcome::ContentFiltered => Err(LlmError::ContentFiltered {
                message: CONTENT_FILTER_MESSAGE.to_owned(),
            }),
            Outcome::ContextLengthExceeded { requested, limit } => Err(LlmError::ContextLength {
                message: context_length_message(requested, limit),
            }),
            Outcome::UnknownDeployment => Err(LlmError::Rejected {
                status: 404,
                message: DEPLOYMENT_NOT_FOUND_MESSAGE.to_owned(),
            }),
        }
    }
}
