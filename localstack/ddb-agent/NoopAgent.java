// LocalStack starts DynamoDB Local with `-javaagent:ddb-local-loader-0.1.jar`, an agent it
// downloads to lift the 20-GSI limit. Offline we cannot download it, and schedkit needs no
// more than 20 GSIs, so the launcher builds this agent, which does nothing, in its place.
public final class NoopAgent {
    public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
