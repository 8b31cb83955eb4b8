//! Removes internals (IPs, hostnames, e-mail, phone numbers, names, CI names) from customer-facing text.
