#!/bin/bash
# LocalStack init hook (runs inside the container once LocalStack is ready;
# the testcontainers provider copies this folder to /etc/localstack/init/ready.d).
# Creates the preset queues the native ElasticMQ config also declares
# (kit/services/elasticmq.ts, PRESET_QUEUES): a standard queue and a
# FIFO queue, each redriving to its own dead-letter queue after 3 receives
# (a FIFO queue's DLQ must itself be FIFO).
set -euo pipefail

MAX_RECEIVES=3

arn_of() {
  awslocal sqs get-queue-attributes --queue-url "$1" --attribute-names QueueArn \
    --query Attributes.QueueArn --output text
}

# create_pair NAME DLQ_NAME [FIFO attributes JSON fragment]
create_pair() {
  local name=$1 dlq=$2 fifo=${3:-}
  local dlq_url dlq_arn redrive
  dlq_url=$(awslocal sqs create-queue --queue-name "$dlq" \
    --attributes "{${fifo}}" --query QueueUrl --output text)
  dlq_arn=$(arn_of "$dlq_url")
  redrive="{\\\"deadLetterTargetArn\\\":\\\"${dlq_arn}\\\",\\\"maxReceiveCount\\\":\\\"${MAX_RECEIVES}\\\"}"
  awslocal sqs create-queue --queue-name "$name" \
    --attributes "{${fifo:+${fifo},}\"RedrivePolicy\":\"${redrive}\"}" >/dev/null
  echo "created $name -> $dlq"
}

create_pair eo-standard eo-standard-dlq
create_pair eo-fifo.fifo eo-fifo-dlq.fifo '"FifoQueue":"true"'
