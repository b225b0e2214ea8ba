"""Creates or updates a schedkit stack on LocalStack from infra/template.yaml (or a team's
copy of it written by `schedkit iac init`).

    infra/deploy-localstack.sh [--stack NAME] [--template PATH] [Parameter=Value ...]
    infra/deploy-localstack.sh --stack NAME --delete

Packages the worker (the crate at the template's CodeUri, wherever it is, in the debug
profile, its binary `Binary` stripped of debug information; this repository's own crates
through functions/package.sh, as the tests build them; or the zip SCHEDKIT_WORKER_ZIP
names) into LocalStack's S3, points the
template's CodeUri at it, uploads the files it refers to (DefinitionUri, relative to the
template), and deploys the same template as on AWS through a change set (inline up to
CloudFormation's 51,200 bytes, through S3 beyond, as `sam deploy` does). LocalStack
reports a change set without changes as created rather than failed (as AWS does); it is
deleted instead of executed, so an unchanged deploy changes nothing. Prints a JSON summary
on stdout: {"stack", "status", "changed", "outputs"}.

Runs on the project's own virtualenv (infra/deploy-localstack.sh installs boto3 into it), not
LocalStack's: it works against a LocalStack that something else started.
"""

import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import zipfile

import boto3
from botocore.exceptions import ClientError

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUCKET = "schedkit-artifacts"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
# Tries per deploy when LocalStack itself fails a resource (see is_localstack_fault).
ATTEMPTS = 3


def log(*args):
    print("deploy:", *args, file=sys.stderr)


def client(service):
    port = os.environ.get("LOCALSTACK_PORT", "4566")
    return boto3.client(
        service,
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}"),
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def upload(s3, path):
    """`path` in S3, keyed by its content (an unchanged file keeps its URI); the S3 URI."""
    data = path.read_bytes()
    key = f"{path.stem}-{hashlib.sha256(data).hexdigest()[:32]}{path.suffix}"
    ensure_bucket(s3)
    try:
        s3.head_object(Bucket=BUCKET, Key=key)
    except ClientError:
        log(f"uploading {path.name} ({len(data) // 1024} KiB) as s3://{BUCKET}/{key}")
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    return f"s3://{BUCKET}/{key}"


def ensure_bucket(s3):
    try:
        s3.head_bucket(Bucket=BUCKET)
    except ClientError:
        s3.create_bucket(Bucket=BUCKET)


# Lambda refuses a function whose unzipped code is larger than this.
UNZIPPED_LIMIT = 250 * 1024 * 1024


def package_worker(template, code_uri, binary):
    """The worker's zip: SCHEDKIT_WORKER_ZIP when given (the tests, which must not start
    cargo while cargo runs them); this repository's own crates through
    functions/package.sh; any other crate (the template's CodeUri, wherever it is) built
    and packaged here."""
    if given := os.environ.get("SCHEDKIT_WORKER_ZIP"):
        path = pathlib.Path(given)
        if not path.is_file():
            sys.exit(f"deploy: error: SCHEDKIT_WORKER_ZIP names {path}, which is not a file")
        return path
    crate = (template.parent / code_uri).resolve()
    if not (crate / "Cargo.toml").is_file():
        sys.exit(
            f"deploy: error: {template} has CodeUri {code_uri}, but {crate} has no Cargo.toml "
            "(CodeUri is the worker crate's folder, relative to the template)"
        )
    if workspace_root(crate) == ROOT:
        # A member of this workspace: packaged as the tests build it (one feature set).
        out = subprocess.run([str(ROOT / "functions/package.sh"), binary], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"deploy: error: functions/package.sh {binary} failed ({out.stderr.strip()[-400:]})")
        return pathlib.Path(out.stdout.strip().splitlines()[-1])
    return package_crate(crate, binary)


def workspace_root(crate):
    """The root of the workspace the crate at `crate` builds in (itself when it has none)."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--manifest-path", str(crate / "Cargo.toml")],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"deploy: error: cargo metadata of {crate} failed: {out.stderr.strip()[-400:]}")
    return pathlib.Path(json.loads(out.stdout)["workspace_root"]).resolve()


def package_crate(crate, binary):
    """`binary` of the crate at `crate`, built in the debug profile and zipped as
    `bootstrap`. Its binaries are built with its tests (one feature set, so a `cargo test`
    afterwards compiles nothing again), and the debug information is stripped from the
    copy that is zipped: a debug build with it is larger than Lambda accepts."""
    log(f"building {binary} in {crate}")
    build = subprocess.run(
        ["cargo", "build", "--manifest-path", str(crate / "Cargo.toml"), "--bins", "--tests",
         "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE, text=True,
    )
    if build.returncode != 0:
        sys.exit(f"deploy: error: cargo build of {crate} failed (its errors are above)")
    executable = pick_executable(build.stdout.splitlines(), crate, binary)
    if executable is None:
        sys.exit(f"deploy: error: {crate} has no binary `{binary}` (the template's Binary)")
    return bundle(executable, binary)


def pick_executable(messages, crate, binary):
    """The executable of the crate's own binary `binary` among cargo's JSON messages (not a
    test binary, not another package's binary of the same name); None when there is none."""
    manifest = (crate / "Cargo.toml").resolve()
    executable = None
    for line in messages:
        message = json.loads(line)
        target = message.get("target", {})
        if (message.get("reason") == "compiler-artifact" and message.get("executable")
                and target.get("name") == binary and "bin" in target.get("kind", [])
                and not message.get("profile", {}).get("test")
                and pathlib.Path(message.get("manifest_path", "")).resolve() == manifest):
            executable = pathlib.Path(message["executable"])
    return executable


def bundle(executable, binary):
    """`executable` without its debug information, zipped as `bootstrap` beside it in
    `lambda/<binary>.zip`; refused over Lambda's unzipped limit. Written under names of
    this deploy's own and renamed into place: two deploys of one crate at once never upload
    a half-written zip."""
    out_dir = executable.parent / "lambda"
    out_dir.mkdir(exist_ok=True)
    stripped = out_dir / f"{binary}.{os.getpid()}"
    try:
        strip = subprocess.run(["strip", "--strip-debug", "-o", str(stripped), str(executable)],
                               capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("deploy: error: `strip` (GNU binutils) is not on PATH; install binutils, "
                 "or package the crate yourself and give the zip as SCHEDKIT_WORKER_ZIP")
    if strip.returncode != 0:
        sys.exit(f"deploy: error: strip --strip-debug {executable} failed: {strip.stderr.strip()}")
    size = stripped.stat().st_size
    if size > UNZIPPED_LIMIT:
        stripped.unlink()
        sys.exit(
            f"deploy: error: {binary} is {size // (1024 * 1024)} MB without its debug information, "
            "over Lambda's 250 MB unzipped limit: build it in release (cargo lambda build --release) "
            "and give the zip as SCHEDKIT_WORKER_ZIP"
        )
    archive = out_dir / f"{binary}.zip"
    partial = out_dir / f"{binary}.zip.{os.getpid()}"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo.from_file(stripped, arcname="bootstrap")
        info.compress_type = zipfile.ZIP_DEFLATED
        # A fixed date: the zip changes only when the binary does (an unchanged deploy is
        # a no-op).
        info.date_time = (1980, 1, 1, 0, 0, 0)
        z.writestr(info, stripped.read_bytes())
    stripped.unlink()
    os.replace(partial, archive)
    log(f"packaged {archive} ({size // (1024 * 1024)} MB unzipped)")
    return archive


def one_line(text, template, key):
    """The value of the template's only `key:` line, or a one-line error naming it."""
    found = re.findall(rf"^\s*{key}: (\S+)\s*$", text, flags=re.MULTILINE)
    if len(found) != 1:
        sys.exit(f"deploy: error: {template} has {len(found)} `{key}:` lines, expected one")
    return found[0]


def template_body(s3, template):
    """The template as `sam build` + `sam package` leave it: its local files in S3."""
    text = template.read_text()
    code = one_line(text, template, "CodeUri")
    zip_uri = upload(s3, package_worker(template, code, one_line(text, template, "Binary")))
    text = text.replace(f"CodeUri: {code}", f"CodeUri: {zip_uri}")
    # One state machine per chain of the catalog (none when it has none), each definition
    # in chains/ beside the template.
    for definition in sorted(set(re.findall(r"^\s*DefinitionUri:\s*(\S+)\s*$", text, re.M))):
        if not (template.parent / definition).is_file():
            sys.exit(f"deploy: error: {template} names DefinitionUri {definition}, which is not beside it")
        definition_uri = upload(s3, template.parent / definition)
        text = text.replace(f"DefinitionUri: {definition}\n", f"DefinitionUri: {definition_uri}\n")
    return text


def stack_status(cfn, stack):
    try:
        return cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError:
        return None


def wait_stack(cfn, stack, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = stack_status(cfn, stack)
        if status is None or status == "DELETE_COMPLETE":
            return "DELETE_COMPLETE"
        if not status.endswith("_IN_PROGRESS"):
            return status
        time.sleep(1)
    sys.exit(f"deploy: error: {stack} still in progress after {timeout} s")


def is_localstack_fault(reason):
    """A resource failed inside LocalStack itself, not because of the template: its Lambda
    service stores every function's code in its own S3 through its HTTP gateway, and that
    internal hop has been seen to drop connections (`InternalError ... Connection was
    closed`) under load. Such a failure says nothing about the stack, so the deploy retries."""
    return "(InternalError)" in reason and "Connection was closed" in reason


def cannot_run_lambdas(reason):
    """LocalStack's own Lambda executor failed to set up (it downloads an init and runs
    functions in Docker): this LocalStack cannot run the worker, whatever the template."""
    return "Installation of lambda-runtime" in reason or "Docker not available" in reason


LAMBDA_FIX = (
    "this LocalStack cannot run Lambda functions (no Docker, or no download of its init, and not"
    " schedkit's executor): start it with localstack/launch.sh start, or with Docker"
    " (docker compose -f localstack/docker-compose.yml up -d)"
)


# CloudFormation takes a template inline up to this many bytes; a larger one (a catalog
# with many chains) must be given as an S3 URL, as `sam deploy` does.
INLINE_LIMIT = 51_200


def template_source(s3, body):
    """How CloudFormation is handed the template: inline when it fits, else uploaded to
    the artifacts bucket (keyed by its content) and named by its URL."""
    data = body.encode()
    if len(data) <= INLINE_LIMIT:
        return {"TemplateBody": body}
    key = f"template-{hashlib.sha256(data).hexdigest()[:32]}.yaml"
    ensure_bucket(s3)
    s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    endpoint = s3.meta.endpoint_url.rstrip("/")
    log(f"the template is {len(data):,} bytes, over CloudFormation's inline {INLINE_LIMIT:,}: "
        f"handed over as s3://{BUCKET}/{key}")
    return {"TemplateURL": f"{endpoint}/{BUCKET}/{key}"}


def deploy_once(cfn, stack, source, params):
    """One change set: (final status, whether anything changed, failure reasons)."""
    existing = stack_status(cfn, stack)
    if existing == "ROLLBACK_COMPLETE":
        log(f"{stack} failed to create before; deleting it first")
        cfn.delete_stack(StackName=stack)
        wait_stack(cfn, stack)
        existing = None
    change_set = f"schedkit-{int(time.time() * 1000)}"
    cfn.create_change_set(
        StackName=stack,
        ChangeSetName=change_set,
        ChangeSetType="UPDATE" if existing else "CREATE",
        **source,
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in sorted(params.items())],
        Capabilities=CAPABILITIES,
    )
    deadline = time.time() + 120
    while True:
        cs = cfn.describe_change_set(StackName=stack, ChangeSetName=change_set)
        if not cs["Status"].endswith("_PENDING") and not cs["Status"].endswith("_IN_PROGRESS"):
            break
        if time.time() > deadline:
            sys.exit("deploy: error: the change set was not created within 120 s")
        time.sleep(0.5)
    no_changes = not cs.get("Changes") or "didn't contain changes" in (cs.get("StatusReason") or "")
    if existing and no_changes:
        cfn.delete_change_set(StackName=stack, ChangeSetName=change_set)
        log(f"{stack}: no changes, nothing deployed")
        changed = False
    elif cs["Status"] == "FAILED":
        sys.exit(f"deploy: error: change set failed: {cs.get('StatusReason')}")
    else:
        log(f"{stack}: executing {len(cs.get('Changes', []))} change(s)")
        cfn.execute_change_set(StackName=stack, ChangeSetName=change_set)
        changed = True
    status = wait_stack(cfn, stack)
    reasons = []
    if status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        events = cfn.describe_stack_events(StackName=stack)["StackEvents"]
        reasons = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}"
            for e in events
            if "FAILED" in e["ResourceStatus"]
        ]
    return status, changed, reasons


def main(argv):
    stack, params, delete = "schedkit-dev", {}, False
    template = ROOT / "infra/template.yaml"
    args = iter(argv)
    for arg in args:
        if arg == "--stack":
            stack = next(args)
        elif arg == "--template":
            template = pathlib.Path(next(args)).resolve()
        elif arg == "--delete":
            delete = True
        elif "=" in arg:
            key, value = arg.split("=", 1)
            params[key] = value
        else:
            sys.exit(
                f"deploy: unknown argument {arg} "
                "(usage: [--stack NAME] [--template PATH] [Param=Value ...])"
            )

    cfn = client("cloudformation")
    if delete:
        if stack_status(cfn, stack):
            functions = [
                r["PhysicalResourceId"]
                for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]
                if r["ResourceType"] == "AWS::Lambda::Function"
            ]
            cfn.delete_stack(StackName=stack)
            wait_stack(cfn, stack)
            # LocalStack deletes the functions but leaves their SQS event source mappings,
            # which then block the next deploy of the same stage.
            lam = client("lambda")
            for mapping in lam.list_event_source_mappings()["EventSourceMappings"]:
                if mapping.get("FunctionArn", "").split(":")[-1] in functions:
                    try:
                        lam.delete_event_source_mapping(UUID=mapping["UUID"])
                    except ClientError:
                        pass
        print(json.dumps({"stack": stack, "status": "DELETED"}))
        return
    if not template.is_file():
        sys.exit(f"deploy: error: no template at {template}")
    s3 = client("s3")
    source = template_source(s3, template_body(s3, template))
    for attempt in range(1, ATTEMPTS + 1):
        status, changed, reasons = deploy_once(cfn, stack, source, params)
        if status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            break
        faults = [r for r in reasons if is_localstack_fault(r)]
        if faults and attempt < ATTEMPTS:
            log(f"{stack} is {status} after LocalStack failed internally ({faults[0]}); deploying again")
            continue
        if any(cannot_run_lambdas(r) for r in reasons):
            sys.exit(f"deploy: error: {stack} is {status}: {LAMBDA_FIX}")
        sys.exit(f"deploy: error: {stack} is {status}: " + "; ".join(reasons[:5]))
    outputs = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    print(
        json.dumps(
            {
                "stack": stack,
                "status": status,
                "changed": changed,
                "outputs": {o["OutputKey"]: o["OutputValue"] for o in outputs},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
