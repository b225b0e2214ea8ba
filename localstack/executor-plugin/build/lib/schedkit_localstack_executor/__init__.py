"""schedkit's LocalStack Lambda runtime executor: functions run as host processes."""
