// The worked example of approvers: refunds over $500 need two of finance.
// refundOrder moves no money: it records the refund in the broker, once per
// order, passing context.idempotencyKey along as a real payment call would.
export async function refundOrder(input, context) {
  const done = await context.broker.get("refunds", input.orderId);
  if (done) {
    if (done.idempotencyKey === context.idempotencyKey) {
      return done; // a retry of this very call
    }
    throw new Error(`order ${input.orderId} was already refunded`);
  }
  const refund = { orderId: input.orderId, amount: input.amount, idempotencyKey: context.idempotencyKey };
  await context.broker.put("refunds", input.orderId, refund);
  console.log(`refunded ${input.amount} on ${input.orderId}`);
  return refund;
}
