//! The worker's grant to read the secrets its catalog lists: each parameter and secret by
//! its ARN, nothing else (a job reads only its own, `Ctx::secret`; the grant is the
//! worker's, as all its jobs run in one function).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::resources::q;
use crate::catalog::Catalog;
use crate::secrets::{Kind, parse, resource};

/// `WorkerSecretsPolicy`, when a job lists a secret.
pub(super) fn write(r: &mut String, catalog: &Catalog) {
    let sources: BTreeSet<&str> = catalog
        .jobs
        .values()
        .flat_map(|j| j.spec.secrets.values().map(String::as_str))
        .collect();
    if sources.is_empty() {
        return;
    }
    // Sets: two versions of one parameter (`name:1`, `name:2`) are one grant.
    let (mut parameters, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    for source in sources {
        let arn = resource(source).expect("validated by the catalog");
        match parse(source).expect("validated by the catalog") {
            Kind::Parameter(_) => parameters.insert(arn),
            Kind::Secret(_) => secrets.insert(arn),
        };
    }
    writeln!(r, "  WorkerSecretsPolicy:").unwrap();
    writeln!(r, "    Type: AWS::IAM::Policy").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      PolicyName: read-secrets").unwrap();
    writeln!(r, "      Roles: [!Ref WorkerRole]").unwrap();
    writeln!(r, "      PolicyDocument:").unwrap();
    writeln!(r, "        Version: \"2012-10-17\"").unwrap();
    writeln!(r, "        Statement:").unwrap();
    for (sid, action, arns) in [
        ("ReadParameters", "ssm:GetParameter", parameters),
        ("ReadSecrets", "secretsmanager:GetSecretValue", secrets),
    ] {
        if arns.is_empty() {
            continue;
        }
        writeln!(r, "          - Sid: {sid}").unwrap();
        writeln!(r, "            Effect: Allow").unwrap();
        writeln!(r, "            Action: {action}").unwrap();
        writeln!(r, "            Resource:").unwrap();
        for arn in arns {
            writeln!(r, "              - !Sub {}", q(&arn)).unwrap();
        }
    }
    r.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_may_read_exactly_the_secrets_its_catalog_lists() {
        let none = Catalog::parse("[jobs.a]\nowner = \"x\"\n", "c.toml").unwrap();
        let mut r = String::new();
        write(&mut r, &none);
        assert!(r.is_empty());
        let catalog = Catalog::parse(
            "[jobs.a]\nowner = \"x\"\nsecrets = { DB_URL = \"ssm:/team/db-url\", KEY = \"secretsmanager:prod/partner\" }\n[jobs.b]\nowner = \"x\"\nsecrets = { DB = \"ssm:/team/db-url\" }\n",
            "c.toml",
        )
        .unwrap();
        write(&mut r, &catalog);
        assert_eq!(r.matches(":parameter/team/db-url").count(), 1, "{r}");
        assert!(r.contains("Action: ssm:GetParameter"), "{r}");
        assert!(r.contains(":secret:prod/partner-??????"), "{r}");
        assert!(r.contains("Action: secretsmanager:GetSecretValue"), "{r}");
        assert!(!r.contains('*'), "no wildcard: {r}");
    }
}
