//! The custom-handler process the Azure Functions host starts.

fn main() {}
