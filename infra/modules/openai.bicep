// Azure OpenAI account with one Standard deployment per tier. Each deployment is its own quota pool; the two
// tiers use different models so their quotas never overlap (quota is per model and deployment type).

@description('Azure region for the account; the models and Standard capacity must be available there.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Account name, also its custom subdomain (the endpoint host name).')
param name string

@description('Turn off API-key access so only Entra ID (the managed identity) can call the account.')
param disableLocalAuth bool

@description('One entry per tier, keyed by tier name. capacity is in units of 1,000 tokens per minute.')
param deployments tierDeployments

@export()
@description('One tier\'s Azure OpenAI deployment.')
type modelDeployment = {
  @description('Deployment name the handler calls.')
  name: string
  @description('Model name, e.g. gpt-4.1.')
  model: string
  @description('Model version, e.g. 2025-04-14.')
  version: string
  @description('Standard capacity: 1 unit = 1,000 tokens per minute (and 6 requests per minute).')
  @minValue(1)
  capacity: int
}

@export()
@description('The deployments of both tiers; the function app reads its settings from the same object.')
type tierDeployments = {
  premium: modelDeployment
  standard: modelDeployment
}

resource account 'Microsoft.CognitiveServices/accounts@2025-06-01' = {
  name: name
  location: location
  tags: tags
  kind: 'OpenAI'
  sku: {
    name: 'S0'
  }
  properties: {
    customSubDomainName: name
    disableLocalAuth: disableLocalAuth
    publicNetworkAccess: 'Enabled'
  }
}

// Deployments in one account must be created one at a time, hence batchSize(1).
@batchSize(1)
resource modelDeploymentResources 'Microsoft.CognitiveServices/accounts/deployments@2025-06-01' = [
  for deployment in items(deployments): {
    parent: account
    name: deployment.value.name
    sku: {
      name: 'Standard'
      capacity: deployment.value.capacity
    }
    properties: {
      model: {
        format: 'OpenAI'
        name: deployment.value.model
        version: deployment.value.version
      }
      versionUpgradeOption: 'OnceCurrentVersionExpired'
    }
  }
]

output name string = account.name
output id string = account.id
output endpoint string = account.properties.endpoint
