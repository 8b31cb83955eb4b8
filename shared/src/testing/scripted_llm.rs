//! An LLM client for tests: it answers from a script, in order, and keeps every request
//! it was sent, so a test can assert both what the model said and what it was asked.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::llm::{ChatRequest, Completion, LlmClient, LlmError};

/// Answers each call with the next scripted result; once the script is spent, every
/// further call gets the `exhausted` error ([`LlmError::Timeout`] unless set otherwise).
#[derive(Debug)]
pub struct ScriptedLlm {
    script: Mutex<VecDeque<Result<Completion, LlmError>>>,
    exhausted: LlmError,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedLlm {
    /// A client answering `script` in order, then timing out.
    pub fn new(script: impl IntoIterator<Item = Result<Completion, LlmError>>) -> ScriptedLlm {
        ScriptedLlm {
            script: Mutex::new(script.into_iter().collect()),
            exhausted: LlmError::Timeout,
            seen: Mutex::default(),
        }
    }

    /// The same client, answering `error` once its script is spent.
    pub fn then_failing_with(self, error: LlmError) -> ScriptedLlm {
        ScriptedLlm {
            exhausted: error,
            ..self
        }
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.seen().len()
    }

    /// Every request sent, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.seen().clone()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<ChatRequest>> {
        // A test that panicked while holding the lock left the list whole.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl LlmClient for ScriptedLlm {
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        self.seen().push(request.clone());
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| Err(self.exhausted.clone()))
    }
}
