//! Harness for the end-to-end tests: a throwaway redis-server, the handler process, the simulator.
