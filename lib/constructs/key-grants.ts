import * as iam from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';

/**
 * Lets `grantee` use `key` for `actions`, in its identity policy and on that key's ARN only.
 * (`IKey.grant` writes `Resource: "*"` when the key lives in another stack or is imported, which
 * is how a platform team's key arrives.) The key policy must let the account's IAM grant it, as
 * the default key policy does.
 */
export function grantKeyUse(grantee: iam.IGrantable, key: IKey, actions: readonly string[]): iam.Grant {
  return iam.Grant.addToPrincipal({ grantee, actions: [...actions], resourceArns: [key.keyArn] });
}
