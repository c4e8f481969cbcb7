/** Template values with CloudFormation intrinsics resolved to the strings they would be on AWS. */
export interface IntrinsicValues {
  readonly account: string;
  readonly region: string;
  /** `Fn::GetAtt` of a logical id and attribute. */
  readonly getAtt: (logicalId: string, attribute: string) => string;
  /** `Ref` of a logical id (pseudo parameters are handled here). @default left as it is */
  readonly ref?: (logicalId: string) => string;
}

export function resolveIntrinsics(v: unknown, values: IntrinsicValues): unknown {
  const resolve = (x: unknown): unknown => resolveIntrinsics(x, values);
  if (Array.isArray(v)) return v.map(resolve);
  if (!v || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  if (o.Ref === 'AWS::Partition') return 'aws';
  if (o.Ref === 'AWS::Region') return values.region;
  if (o.Ref === 'AWS::AccountId') return values.account;
  if (o.Ref === 'AWS::URLSuffix') return 'amazonaws.com';
  if (typeof o.Ref === 'string' && values.ref) return values.ref(o.Ref);
  const getAtt = o['Fn::GetAtt'] as [string, string] | undefined;
  if (getAtt) return values.getAtt(getAtt[0], getAtt[1]);
  const join = o['Fn::Join'] as [string, unknown[]] | undefined;
  if (join) return join[1].map(resolve).join(join[0]);
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, resolve(x)]));
}
