// The starter's tool handlers. Each named export is a tool; stead.json
// declares its posture. Like the seed's starter, refundOrder moves no money:
// it sets a demo order's amount to zero in the broker. Replace it with your
// own reviewed integration before using a real refund flow.

// listOrders returns the end user's orders (a read).
export async function listOrders(input, context) {
  const orders = await context.broker.list("orders");
  const list = orders.map((o) => o.value);
  console.log(`listOrders: ${list.length} orders for ${context.endUserId}`);
  return { orders: list };
}

// refundOrder zeroes a demo order's amount (a write that needs approval).
// It passes context.idempotencyKey along, as a real payment API call would,
// and refuses to refund the same order twice.
export async function refundOrder(input, context) {
  const order = await context.broker.get("orders", input.orderId);
  if (!order) {
    throw new Error(`order ${input.orderId} not found for ${context.endUserId}`);
  }
  if (order.refund) {
    if (order.refund.idempotencyKey === context.idempotencyKey) {
      return order.refund; // a retry of this very call: same result, no second refund
    }
    throw new Error(`order ${input.orderId} was already refunded`);
  }
  const refund = {
    orderId: order.id,
    refunded: order.amount,
    reason: input.reason ?? "",
    idempotencyKey: context.idempotencyKey,
  };
  await context.broker.put("orders", order.id, { ...order, amount: 0, refund });
  console.log(`refunded ${order.amount} on ${order.id}`);
  return refund;
}

// fetchReviews returns what customers wrote about an order's item. The text
// comes from outside, so the tool is declared `source: external` and the run
// becomes untrusted afterwards: every later write asks for approval.
export async function fetchReviews(input, context) {
  const reviews = (await context.broker.get("reviews", input.orderId)) ?? [];
  return { orderId: input.orderId, reviews };
}
