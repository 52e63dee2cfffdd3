// Tool handlers: each named export is a tool of stead.json, called with the
// step's input and a context (see stead.d.ts; your editor completes it).
import type { Context } from "./stead";

interface Customer {
  email: string;
  name: string;
}

export async function lookupCustomer(_input: Record<string, never>, context: Context): Promise<Customer> {
  const found = await context.broker.get<Customer>("customers", context.endUserId);
  // A first run has no record yet: make one, so the walkthrough works as is.
  const customer = found ?? { email: `${context.endUserId}@example.com`, name: context.endUserId };
  if (!found) await context.broker.put("customers", context.endUserId, customer);
  return customer;
}

interface SendMessageInput {
  to: string;
  text: string;
}

export async function sendMessage(input: SendMessageInput, context: Context): Promise<{ sent: boolean; id: string }> {
  // The idempotency key is the same on a retry after a crash: a real mail
  // service given it sends once.
  await context.broker.put("outbox", context.idempotencyKey, { ...input, at: new Date().toISOString() });
  console.log(`message to ${input.to} queued`);
  return { sent: true, id: context.idempotencyKey };
}
