//! The storm lab: scenarios, the virtual-time replay engine, policies and the report.
