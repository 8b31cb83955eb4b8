//! The token governor: admits LLM calls within each deployment's TPM/RPM budget, fleet-wide.
