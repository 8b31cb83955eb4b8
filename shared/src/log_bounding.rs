//! Bounds ticket logs before anything expensive: collapse repeated alarms, keep head and tail, cap bytes.
