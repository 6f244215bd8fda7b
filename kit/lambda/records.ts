import type { Message } from '@aws-sdk/client-sqs';
import type { SQSMessageAttributes, SQSRecord, SQSRecordAttributes } from 'aws-lambda';

/** The queue's ARN as Lambda names it in `eventSourceARN` (the emulator's own when it has one). */
export function queueArnOf(queueUrl: string, region = 'us-east-1'): string {
  const name = queueUrl.slice(queueUrl.lastIndexOf('/') + 1);
  return `arn:aws:sqs:${region}:000000000000:${name}`;
}

/**
 * A received SQS message as Lambda's event source mapping hands it to the function: the
 * `SQSRecord` shape of its documented event (lower-case fields, system attributes under
 * `attributes`, message attributes with `stringValue` / `binaryValue` in base64).
 */
export function lambdaRecord(message: Message, queueArn: string, region = 'us-east-1'): SQSRecord {
  const a = message.Attributes ?? {};
  const attributes: SQSRecordAttributes = {
    ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
    SentTimestamp: a.SentTimestamp ?? String(Date.now()),
    SenderId: a.SenderId ?? 'AIDAEMULATOR',
    ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    ...(a.SequenceNumber !== undefined ? { SequenceNumber: a.SequenceNumber } : {}),
    ...(a.MessageGroupId !== undefined ? { MessageGroupId: a.MessageGroupId } : {}),
    ...(a.MessageDeduplicationId !== undefined
      ? { MessageDeduplicationId: a.MessageDeduplicationId }
      : {}),
  };
  const messageAttributes: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined
        ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }
        : {}),
    };
  }
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body ?? '',
    attributes,
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}
