//! The local severity classifier: features, model, route-up rule, training and evaluation.
