//! Azure OpenAI metering, as the simulator and the lab apply it: per-minute tokens, short request windows.
