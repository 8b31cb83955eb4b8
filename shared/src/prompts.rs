//! Versioned prompt templates for the three summary kinds; ticket text only ever as delimited user content.
