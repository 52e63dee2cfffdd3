package dynamostore

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr builds an UpdateItem request: SET, REMOVE and ADD clauses and a
// condition, with every attribute name and value behind a placeholder (so
// that no name trips over DynamoDB's reserved words).
type expr struct {
	set, remove, add []string
	cond             []string
	names            map[string]string
	values           map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// n is the placeholder of an attribute name.
func (e *expr) n(attr string) string {
	ph := "#" + attr
	e.names[ph] = attr
	return ph
}

// nested is the placeholder path of a key inside a map attribute.
func (e *expr) nested(attr, k string) string {
	ph := "#k" + fmt.Sprint(len(e.names))
	e.names[ph] = k
	return e.n(attr) + "." + ph
}

// v is the placeholder of a value.
func (e *expr) v(av types.AttributeValue) string {
	ph := fmt.Sprintf(":v%d", len(e.values))
	e.values[ph] = av
	return ph
}

// Set sets attr to av.
func (e *expr) Set(attr string, av types.AttributeValue) {
	e.set = append(e.set, e.n(attr)+" = "+e.v(av))
}

// SetIfAbsent sets attr to av unless it has a value.
func (e *expr) SetIfAbsent(attr string, av types.AttributeValue) {
	n := e.n(attr)
	e.set = append(e.set, fmt.Sprintf("%s = if_not_exists(%s, %s)", n, n, e.v(av)))
}

// SetExpr adds a raw SET clause built with n and v.
func (e *expr) SetExpr(clause string) { e.set = append(e.set, clause) }

// Remove removes attrs.
func (e *expr) Remove(attrs ...string) {
	for _, a := range attrs {
		e.remove = append(e.remove, e.n(a))
	}
}

// Add adds av to a number or set attribute.
func (e *expr) Add(attr string, av types.AttributeValue) {
	e.add = append(e.add, e.n(attr)+" "+e.v(av))
}

// Cond ands a condition.
func (e *expr) Cond(c string) { e.cond = append(e.cond, "("+c+")") }

// update is the UpdateItem request of e on the item at k, returning the new
// item, or the old one when the condition fails.
func (e *expr) update(table string, k item) *dynamodb.UpdateItemInput {
	var clauses []string
	if len(e.set) > 0 {
		clauses = append(clauses, "SET "+strings.Join(e.set, ", "))
	}
	if len(e.remove) > 0 {
		clauses = append(clauses, "REMOVE "+strings.Join(e.remove, ", "))
	}
	if len(e.add) > 0 {
		clauses = append(clauses, "ADD "+strings.Join(e.add, ", "))
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(table),
		Key:                                 k,
		UpdateExpression:                    aws.String(strings.Join(clauses, " ")),
		ExpressionAttributeNames:            e.names,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(e.values) > 0 {
		in.ExpressionAttributeValues = e.values
	}
	if len(e.cond) > 0 {
		in.ConditionExpression = aws.String(strings.Join(e.cond, " AND "))
	}
	return in
}

// txUpdate is e as an update inside a transaction, on the item at k.
func (e *expr) txUpdate(table string, k item) *types.Update {
	in := e.update(table, k)
	return &types.Update{
		TableName: in.TableName, Key: k, UpdateExpression: in.UpdateExpression, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// txPut is a put of it inside a transaction, conditional on e's condition
// (e has no SET, REMOVE or ADD clauses).
func (e *expr) txPut(table string, it item) *types.Put {
	p := &types.Put{
		TableName: aws.String(table), Item: it,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(e.names) > 0 {
		p.ExpressionAttributeNames = e.names
	}
	if len(e.values) > 0 {
		p.ExpressionAttributeValues = e.values
	}
	if len(e.cond) > 0 {
		p.ConditionExpression = aws.String(strings.Join(e.cond, " AND "))
	}
	return p
}

// txCheck is a check of e's condition inside a transaction, on the item at
// k (e has no SET, REMOVE or ADD clauses).
func (e *expr) txCheck(table string, k item) *types.ConditionCheck {
	c := &types.ConditionCheck{TableName: aws.String(table), Key: k, ConditionExpression: aws.String(strings.Join(e.cond, " AND "))}
	if len(e.names) > 0 {
		c.ExpressionAttributeNames = e.names
	}
	if len(e.values) > 0 {
		c.ExpressionAttributeValues = e.values
	}
	return c
}
