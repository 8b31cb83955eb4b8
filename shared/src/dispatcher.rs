//! The dispatch step: drains the priority queues within the governor's budget, spills past deadlines.
